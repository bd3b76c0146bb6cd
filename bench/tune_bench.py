#!/usr/bin/python3
"""`inferd tune` on the example models (issue 41's target): tiny_mlp, resnet18 and breast_cancer, each against a p99
objective, each search bounded to 10 minutes; the chosen config's throughput within the objective over the model's
own config's, both measured in the same run by the tuner.

  /usr/bin/python3 bench/tune_bench.py --inferd build/src/inferd [--out FILE.md] [--budget-s 600]

The examples are made fresh (scripts/make_examples.py --skip-chat) in a temporary folder. Each model's full tune
output (report.md, report.json, throughput_vs_p99.png, config.pbtxt) goes beside FILE.md in FILE-<model>/.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# model, objective p99 (ms): a latency a service would promise for such a model on this machine.
MODELS = [("tiny_mlp", 5.0), ("resnet18", 200.0), ("breast_cancer", 5.0)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--budget-s", type=float, default=600)
    ap.add_argument("--core-hour-usd", type=float, default=0.05)
    args = ap.parse_args()
    inferd = os.path.abspath(args.inferd)
    tmp = tempfile.mkdtemp(prefix="inferd-tune-bench-")
    try:
        repo = os.path.join(tmp, "repository")
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "make_examples.py"), repo, "--skip-chat"],
                       check=True, stdout=subprocess.DEVNULL)
        base = os.path.splitext(args.out)[0] if args.out else os.path.join(tmp, "tune")
        rows = []
        for model, p99 in MODELS:
            out = base + "-" + model
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.time()
            p = subprocess.run([inferd, "tune", "-m", model, "--model-repository", repo, "--p99-ms", str(p99),
                                "--time-budget-s", str(args.budget_s), "--core-hour-usd", str(args.core_hour_usd),
                                "--output-dir", out], stdout=subprocess.PIPE, text=True)
            wall = time.time() - t0
            print(p.stdout, end="", flush=True)
            with open(os.path.join(out, "report.json")) as f:
                rep = json.load(f)
            rows.append((model, p99, rep, wall, p.returncode))
        report = render(rows, args, base)
        print(report)
        if args.out:
            with open(args.out, "w") as f:
                f.write(report)
            with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
                json.dump([{"model": m, "p99_ms": p, "wall_s": w, "exit": rc, "report": r} for m, p, r, w, rc in rows],
                          f, indent=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def render(rows, args, base):
    m = rows[0][2]["machine"]
    out = ["# `inferd tune` on the example models (issue 41)", "",
           "%s, %d cores, inferd %s, %s. Each search bounded to %.0f s; cost at $%.4f per core-hour. The tuner's "
           "load generator runs on the same machine (its cores are in each report)." % (
               m["cpu_model"], m["cores"], m["inferd_version"], datetime.date.today().isoformat(), args.budget_s,
               args.core_hour_usd), "",
           "The protocol is one of the settings searched; the column after the ratio splits it off: the chosen settings "
           "over the model's own server settings measured with the chosen protocol (1.00x: the gain is the "
           "protocol's).", "",
           "| model | objective p99 | own config, predictions/s | chosen, predictions/s | chosen / own | of which server "
           "settings | chosen settings | candidates (grid) | time | $/1M used: own -> chosen |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for model, p99, rep, wall, rc in rows:
        cands = rep["candidates"]
        own = cands[0] if cands else None
        chosen = cands[rep["chosen"]] if rep["chosen"] >= 0 else None

        def cost(c):
            if not c or c["operating_point"] < 0:
                return "-"
            return "$%.3g" % c["points"][c["operating_point"]]["usd_per_million_used"]
        server_gain = "-"
        if chosen and own:
            same = [c for c in cands if c["key"] == own["key"].rsplit(", ", 1)[0] + ", " + chosen["settings"]["protocol"]]
            if same and same[0]["feasible"]:
                server_gain = "%.2fx" % (chosen["predictions_per_s"] / same[0]["predictions_per_s"])
        out.append("| %s | %.0f ms | %s | %s | %s | %s | %s | %d (%d) | %.0f s | %s -> %s |" % (
            model, p99, "%.0f" % own["predictions_per_s"] if own and own["feasible"] else "not met",
            "%.0f" % chosen["predictions_per_s"] if chosen else "none",
            "%.2fx" % rep["chosen_vs_default"] if chosen and rep["chosen_vs_default"] else "-", server_gain,
            chosen["key"] if chosen else "-", len(cands), rep["search"]["grid_size"], wall, cost(own), cost(chosen)))
    out += ["", "Verdicts:", ""]
    for model, p99, rep, wall, rc in rows:
        out.append("- **%s**: %s (stopped: %s)" % (model, rep["verdict"], rep["search"]["stop_reason"]))
    out += ["", "Each model's report, plot and config: `%s-<model>/`." % os.path.basename(base), ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
