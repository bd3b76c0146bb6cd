#!/usr/bin/env python3
"""The request path, A/B: two inferd binaries (before and after a change of the request path) serve the example
repository's tiny_mlp in turn, round after round, and `inferd bench` (of the `after` binary, the same load generator
for both) measures each: the p50 latency at concurrency 1 and the throughput at concurrency 32 (issue 34's rows).
The order alternates per round (ABBA...), so a drift of the machine hits both. Reports the medians over the rounds,
the ratio after/before, and the noise: the spread of the same binary's rounds.

  /usr/bin/python3 bench/request_path_ab.py --before /tmp/old/build/src/inferd --after build/src/inferd [--rounds 6]
"""
import argparse
import json
import os
import statistics
import subprocess

import run_bench as rb

ROOT = rb.ROOT


def measure(binary, loadgen, repo, work, tag, extra=(), after=None):
    """(c1 p50 us, c32 req/s) of `binary` serving tiny_mlp with `extra` flags; `after(metrics_port)`, when given, is
    called before the server stops and its result returned third."""
    port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
    p = rb.Proc([binary, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port", str(mport),
                 "--grpc-port", str(gport), "--host", "127.0.0.1", "--log-level", "warn", *extra],
                port, "/v2/health/ready", os.path.join(work, "inferd-%s.log" % tag))
    out = {}
    try:
        for c in (1, 32):
            path = os.path.join(work, "row.json")
            subprocess.run([loadgen, "bench", "-m", "tiny_mlp", "--label", tag, "--output", path, "--url",
                            "http://127.0.0.1:%d" % port, "--warmup-s", "1", "--window-s", "1", "--max-windows", "4",
                            "--concurrency", str(c)], check=True, stdout=subprocess.DEVNULL)
            with open(path) as f:
                row = json.load(f)["rows"][0]
            if row.get("errors"):
                raise RuntimeError("%s: %d errors at concurrency %d" % (tag, row["errors"], c))
            out[c] = row
        extra_result = after(mport) if after else None
    finally:
        p.stop()
    if after:
        return out[1]["p50_us"], out[32]["requests_per_s"], extra_result
    return out[1]["p50_us"], out[32]["requests_per_s"]


def spread(xs):
    return (max(xs) - min(xs)) / statistics.median(xs) * 100 if xs else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    work, repo = rb.example_repo("inferd-ab-")
    res = {"before": {"p50": [], "rps": []}, "after": {"p50": [], "rps": []}}
    for r in range(a.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for tag in order:
            p50, rps = measure(getattr(a, tag), a.after, repo, work, tag)
            res[tag]["p50"].append(p50)
            res[tag]["rps"].append(rps)
            print("round %d %-6s c1 p50 %7.0f us   c32 %8.0f req/s" % (r + 1, tag, p50, rps), flush=True)
    b, f = res["before"], res["after"]
    mp = (statistics.median(f["p50"]), statistics.median(b["p50"]))
    mr = (statistics.median(f["rps"]), statistics.median(b["rps"]))
    lines = [
        "# The request path A/B (issue 34): tiny_mlp, %d rounds, order alternating" % a.rounds,
        "",
        "%s, %d cores; before: `%s`, after: `%s`" % (rb.cpu_model(), os.cpu_count(), a.before, a.after),
        "",
        "| row | before (median) | after (median) | after / before | noise: spread of before's rounds | after's |",
        "|---|---:|---:|---:|---:|---:|",
        "| c1 p50 latency (us) | %.0f | %.0f | %.3f | %.1f%% | %.1f%% |" % (mp[1], mp[0], mp[0] / mp[1], spread(b["p50"]),
                                                                        spread(f["p50"])),
        "| c32 throughput (req/s) | %.0f | %.0f | %.3f | %.1f%% | %.1f%% |" % (mr[1], mr[0], mr[0] / mr[1],
                                                                           spread(b["rps"]), spread(f["rps"])),
    ]
    rb.write_results(a.out_dir, "request-path-ab", lines, res)


if __name__ == "__main__":
    main()
