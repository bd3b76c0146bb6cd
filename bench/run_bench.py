#!/usr/bin/python3
"""inferd's benchmark suite (`make bench`): inferd against the physical limit
(the same model called in-process) and against what people build instead (a
FastAPI server), plus the machine's HTTP floor (nginx), all in one run.
Reports ratios, since absolute times drift on small shared machines.

Scenarios
  (a) tiny MLP, batch-1 requests: overhead at concurrency 1, throughput at 8/32
  (b) ResNet-18: concurrency sweep, batching on vs off vs in-process best batch
  (c) inferd vs FastAPI (best worker count tried) at the same concurrency
  (d) inferd over gRPC next to HTTP, same server, same load generator

Writes bench/results/<date>-<host>.{json,md} and PNG plots. One server runs at
a time; the load generator (`inferd bench`) is the same for every target.

Usage: run_bench.py --inferd build/src/inferd [--quick]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(port, path, timeout=60):
    """Polls until the server answers (the servers start in the background)."""
    import http.client
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status < 500:
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server on port %d did not come up" % port)


def read_openai_stream(response, chat=False):
    """An OpenAI server-sent event stream (completions, or chat when `chat`) read to its end: the times of its first
    and last text, the text, and usage.completion_tokens (stream_options.include_usage)."""
    import json
    first = last = None
    text, tokens = [], 0
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        for ch in ev.get("choices") or []:
            piece = (ch.get("delta") or {}).get("content") if chat else ch.get("text")
            if piece:
                now = time.perf_counter()
                first = first or now
                last = now
                text.append(piece)
        if ev.get("usage"):
            tokens = ev["usage"]["completion_tokens"]
    return {"first": first, "last": last, "text": "".join(text), "tokens": tokens}


class Proc:
    def __init__(self, args, ready_port, ready_path, log):
        self.log = open(log, "w")
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_http(ready_port, ready_path)

    def stop(self):
        try:
            os.killpg(self.p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
        self.log.close()


class Suite:
    def __init__(self, args, work):
        self.a = args
        self.work = work
        self.rows = []
        q = args.quick
        self.window = "0.5" if q else "1"
        self.cnn_window = "1" if q else "2"
        self.max_windows = "3" if q else "6"
        # Optional CPU pinning (taskset lists, e.g. "0" and "1"): the server and the load generator on their own
        # cores, so a descheduled client thread does not show up as server latency.
        self.server_cpus = getattr(args, "server_cpus", None)
        self.client_cpus = getattr(args, "client_cpus", None)

    def _pinned(self, cpus, cmd):
        return (["taskset", "-c", cpus] if cpus else []) + cmd

    def bench(self, label, port, model, extra, window=None, metadata_port=None):
        args = ["--url", "http://127.0.0.1:%d" % port, "--warmup-s", "1" if not self.a.quick else "0.5",
                "--window-s", window or self.window, "--max-windows", self.max_windows] + extra
        if metadata_port:
            args += ["--metadata-url", "http://127.0.0.1:%d" % metadata_port]
        return self._run(label, model, args)

    def in_process(self, label, repo, model, sizes, threads):
        return self._run(label, model, ["--in-process", "--model-repository", repo, "--batch-sizes", sizes,
                                        "--threads", str(threads), "--warmup-s", "1",
                                        "--window-s", "1" if self.a.quick else "3"])

    def _run(self, label, model, args):
        """Runs `inferd bench` and keeps its report rows, tagged with the model."""
        out = os.path.join(self.work, "row.json")
        cmd = self._pinned(self.client_cpus, [self.a.inferd, "bench", "-m", model, "--label", label, "--output", out] + args)
        print("  $", " ".join(cmd[cmd.index("bench"):]), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            rows = json.load(f)["rows"]
        for r in rows:
            r["model"] = model
        self.rows += rows
        return rows

    def inferd_server(self, repo, tag):
        port, mport, self.grpc_port = free_port(), free_port(), free_port()
        p = Proc(self._pinned(self.server_cpus, [
                     self.a.inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port",
                     str(mport), "--grpc-port", str(self.grpc_port), "--host", "127.0.0.1", "--log-level", "warn"]),
                 port, "/v2/health/ready", os.path.join(self.work, "inferd-%s.log" % tag))
        return p, port

    def grpc(self):
        """`inferd bench` arguments for the last started inferd's gRPC port."""
        return ["--protocol", "grpc", "--grpc-url", "127.0.0.1:%d" % self.grpc_port]


def strip_batching(src, dst):
    shutil.copytree(src, dst)
    for m in os.listdir(dst):
        cfg = os.path.join(dst, m, "config.pbtxt")
        if os.path.exists(cfg):
            text = open(cfg).read()
            text = re.sub(r"dynamic_batching\s*\{[^{}]*(\{[^{}]*\}[^{}]*)*\}", "", text)
            open(cfg, "w").write(text)


def with_parameter(src, dst, key, value):
    """A copy of the repository with a config parameter added to every model."""
    shutil.copytree(src, dst)
    for m in os.listdir(dst):
        cfg = os.path.join(dst, m, "config.pbtxt")
        if os.path.exists(cfg):
            with open(cfg, "a") as f:
                f.write('\nparameters { key: "%s" value: { string_value: "%s" } }\n' % (key, value))


def bench_args():
    """The arguments every issue bench takes: --inferd, --quick, --out-dir."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    return ap.parse_args()


def example_repo(prefix):
    """A fresh work folder and in it the example repository without the chat model (the A/B benches' tiny_mlp)."""
    work = tempfile.mkdtemp(prefix=prefix)
    repo = os.path.join(work, "repo")
    subprocess.run([PY, os.path.join(ROOT, "scripts", "make_examples.py"), repo, "--skip-chat"], check=True,
                   stdout=subprocess.DEVNULL)
    return work, repo


def write_results(out_dir, name, lines, data):
    """Writes bench/results/<date>-<host>-<name>.{md,json} and prints the report."""
    date = datetime.date.today().isoformat()
    host = platform.node().split(".")[0] or "host"
    base = os.path.join(out_dir, "%s-%s-%s" % (date, host, name))
    os.makedirs(out_dir, exist_ok=True)
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(base + ".json", "w") as f:
        json.dump(data, f, indent=1)
    print("\n".join(lines))


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def pick(rows, **kw):
    out = [r for r in rows if all(r.get(k) == v for k, v in kw.items())]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", default=os.path.join(ROOT, "build/src/inferd"))
    ap.add_argument("--quick", action="store_true", help="short windows (smoke test of the suite)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    t_start = time.time()
    work = tempfile.mkdtemp(prefix="inferd-bench-")
    repo = os.path.join(work, "repo")
    subprocess.run([PY, os.path.join(ROOT, "scripts", "make_examples.py"), repo, "--skip-chat"], check=True, stdout=subprocess.DEVNULL)
    repo_off = os.path.join(work, "repo-nobatch")
    strip_batching(repo, repo_off)
    # TorchScript modules as loaded, without freezing and optimize_for_inference (the default since issue 13).
    repo_plain = os.path.join(work, "repo-plain")
    with_parameter(repo, repo_plain, "OPTIMIZE_FOR_INFERENCE", "false")
    s = Suite(a, work)
    cores = os.cpu_count()

    # The limit: the model alone, all cores for the CNN (the example config runs
    # 2 single-threaded instances), measured at the start and again at the end;
    # the better run counts (this VM's neighbours make single runs noisy).
    def limits():
        s.in_process("in-process", repo, "tiny_mlp", "1,8,32", 1)
        s.in_process("in-process", repo, "resnet18", "1,2,4,8", cores)
        s.in_process("in-process plain", repo_plain, "tiny_mlp", "1,8,32", 1)
        s.in_process("in-process plain", repo_plain, "resnet18", "1,2,4,8", cores)
        s.in_process("in-process", repo, "breast_cancer", "1,8,32,128", 1)

    print("[1/5] in-process limits", flush=True)
    limits()
    s.in_process("in-process 1 thread", repo, "resnet18", "1,2,4,8", 1)

    print("[2/5] inferd, batching on", flush=True)
    p, port = s.inferd_server(repo, "on")
    try:
        s.bench("inferd", port, "tiny_mlp", ["--concurrency", "1,8,32"])
        s.bench("inferd binary", port, "tiny_mlp", ["--concurrency", "1", "--protocol", "v2-binary"])
        s.bench("inferd", port, "resnet18", ["--concurrency", "1,4,8,16,32", "--protocol", "v2-binary"],
                window=s.cnn_window)
        s.bench("inferd json", port, "resnet18", ["--concurrency", "32"], window=s.cnn_window)
        s.bench("inferd grpc", port, "tiny_mlp", ["--concurrency", "1,8,32"] + s.grpc())
        s.bench("inferd grpc", port, "resnet18", ["--concurrency", "1,32"] + s.grpc(), window=s.cnn_window)
        s.bench("inferd", port, "breast_cancer", ["--concurrency", "1,32", "--protocol", "v2-binary"])
        s.bench("inferd 16 rows", port, "breast_cancer",
                ["--concurrency", "32", "--protocol", "v2-binary", "--batch-size", "16"])
    finally:
        p.stop()

    print("[2b/5] inferd, plain (unoptimised) TorchScript modules", flush=True)
    p, port = s.inferd_server(repo_plain, "plain")
    try:
        s.bench("inferd plain", port, "tiny_mlp", ["--concurrency", "1,32"])
        s.bench("inferd plain", port, "resnet18", ["--concurrency", "1,32", "--protocol", "v2-binary"],
                window=s.cnn_window)
    finally:
        p.stop()

    print("[3/5] inferd, batching off", flush=True)
    p, port = s.inferd_server(repo_off, "off")
    try:
        s.bench("inferd batching off", port, "tiny_mlp", ["--concurrency", "1,32"])
        s.bench("inferd batching off", port, "resnet18", ["--concurrency", "1,8,32", "--protocol", "v2-binary"],
                window=s.cnn_window)
    finally:
        p.stop()

    print("[4/5] FastAPI baseline", flush=True)
    fastapi_tried = []
    for workers in (1, 2):
        port = free_port()
        fp = Proc([PY, os.path.join(ROOT, "bench", "baselines", "fastapi_server.py"), "--model-repository", repo,
                   "--model", "tiny_mlp", "--port", str(port), "--workers", str(workers)], port,
                  "/v2/models/tiny_mlp", os.path.join(work, "fastapi-%d.log" % workers))
        try:
            s.bench("fastapi %dw" % workers, port, "tiny_mlp", ["--concurrency", "1,8,32"])
        finally:
            fp.stop()
        port = free_port()
        fp = Proc([PY, os.path.join(ROOT, "bench", "baselines", "fastapi_server.py"), "--model-repository", repo,
                   "--model", "resnet18", "--port", str(port), "--workers", str(workers)], port,
                  "/v2/models/resnet18", os.path.join(work, "fastapi-cnn-%d.log" % workers))
        try:
            s.bench("fastapi %dw" % workers, port, "resnet18", ["--concurrency", "32"], window=s.cnn_window)
        finally:
            fp.stop()
        fastapi_tried.append(workers)

    print("[5/5] HTTP floor (nginx)", flush=True)
    nginx_port = free_port()
    ndir = os.path.join(work, "nginx")
    os.makedirs(ndir)
    conf = open(os.path.join(ROOT, "bench", "baselines", "nginx.conf.in")).read()
    conf = conf.replace("@PORT@", str(nginx_port)).replace("@DIR@", ndir)
    open(os.path.join(ndir, "nginx.conf"), "w").write(conf)
    # nginx needs a metadata source for the body: a short-lived inferd gives it.
    p, meta_port = s.inferd_server(repo, "meta")
    np_ = Proc(["/usr/sbin/nginx", "-c", os.path.join(ndir, "nginx.conf"), "-e", os.path.join(ndir, "err.log")],
               nginx_port, "/", os.path.join(work, "nginx.log"))
    try:
        s.bench("nginx floor", nginx_port, "tiny_mlp", ["--concurrency", "1,32"], metadata_port=meta_port)
    finally:
        np_.stop()
        p.stop()

    print("[+] in-process limits again", flush=True)
    limits()

    report = analyse(s.rows, fastapi_tried, cores)
    report["machine"] = {"cpu_model": cpu_model(), "cores": cores, "host": socket.gethostname(),
                         "kernel": platform.release(), "python": platform.python_version(),
                         "torch": subprocess.run([PY, "-c", "import torch;print(torch.__version__)"],
                                                 capture_output=True, text=True).stdout.strip(),
                         "inferd": subprocess.run([a.inferd, "--version"], capture_output=True,
                                                  text=True).stdout.strip(),
                         "nginx": subprocess.run(["/usr/sbin/nginx", "-v"], capture_output=True,
                                                 text=True).stderr.strip(),
                         "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "quick": a.quick, "suite_seconds": round(time.time() - t_start, 1)}
    report["rows"] = s.rows
    os.makedirs(a.out_dir, exist_ok=True)
    stem = os.path.join(a.out_dir, "%s-%s" % (datetime.date.today().isoformat(), socket.gethostname()))
    json.dump(report, open(stem + ".json", "w"), indent=1)
    plots = make_plots(s.rows, stem)
    open(stem + ".md", "w").write(markdown(report, plots))
    print(open(stem + ".md").read())
    print("wrote %s.{json,md} in %.0f s" % (stem, time.time() - t_start))
    shutil.rmtree(work, ignore_errors=True)


def analyse(rows, fastapi_tried, cores):
    def one(**kw):
        r = pick(rows, **kw)
        return max(r, key=lambda x: x["inferences_per_s"]) if r else None

    t = {}
    # In-process rows appear twice (start and end of the suite): `one` takes the better.
    inproc_tiny = one(label="in-process", model="tiny_mlp", load=1)
    inferd_c1 = one(label="inferd", model="tiny_mlp", load=1)
    nginx_c1 = one(label="nginx floor", load=1)
    if inproc_tiny and inferd_c1 and nginx_c1:
        t["overhead_us"] = {
            "value": inferd_c1["p50_us"] - inproc_tiny["p50_us"] - nginx_c1["p50_us"], "target": "<= 25",
            "note": "p50s; the in-process row with the higher throughput is used",
            "inferd_p50_us": inferd_c1["p50_us"], "in_process_p50_us": inproc_tiny["p50_us"],
            "nginx_p50_us": nginx_c1["p50_us"]}
    fa_tiny = [r for r in rows if r["label"].startswith("fastapi") and r["model"] == "tiny_mlp" and r["load"] == 32]
    inf_tiny32 = one(label="inferd", model="tiny_mlp", load=32)
    if fa_tiny and inf_tiny32:
        best = max(fa_tiny, key=lambda r: r["inferences_per_s"])
        t["tiny_vs_fastapi_c32"] = {"value": inf_tiny32["inferences_per_s"] / best["inferences_per_s"],
                                    "target": ">= 10", "fastapi": best["label"]}
    fa_cnn = [r for r in rows if r["label"].startswith("fastapi") and r["model"] == "resnet18"]
    inf_cnn32 = one(label="inferd", model="resnet18", load=32)
    inf_cnn32_json = one(label="inferd json", model="resnet18", load=32)
    if fa_cnn and inf_cnn32:
        best = max(fa_cnn, key=lambda r: r["inferences_per_s"])
        t["cnn_vs_fastapi_c32"] = {"value": inf_cnn32["inferences_per_s"] / best["inferences_per_s"],
                                   "target": ">= 2", "fastapi": best["label"], "inferd_protocol": "v2-binary"}
        if inf_cnn32_json:
            t["cnn_vs_fastapi_c32_both_json"] = {
                "value": inf_cnn32_json["inferences_per_s"] / best["inferences_per_s"], "target": "(info)"}
    inproc_cnn = [r for r in rows if r["label"] == "in-process" and r["model"] == "resnet18"]
    if inproc_cnn and inf_cnn32:
        best = max(inproc_cnn, key=lambda r: r["inferences_per_s"])
        t["cnn_served_vs_in_process_best"] = {"value": inf_cnn32["inferences_per_s"] / best["inferences_per_s"],
                                              "target": ">= 0.90", "in_process_best_batch": best["batch_size"]}
    # Load-time optimisation (freeze + optimize_for_inference) against the plain module.
    inproc_plain = [r for r in rows if r["label"] == "in-process plain" and r["model"] == "resnet18"]
    if inproc_cnn and inproc_plain:
        a = max(inproc_cnn, key=lambda r: r["inferences_per_s"])
        b = max(inproc_plain, key=lambda r: r["inferences_per_s"])
        t["cnn_optimised_vs_plain_in_process_best"] = {
            "value": a["inferences_per_s"] / b["inferences_per_s"], "target": "(info)",
            "optimised_batch": a["batch_size"], "plain_batch": b["batch_size"]}
    for model in ("resnet18", "tiny_mlp"):
        o, pl = one(label="inferd", model=model, load=32), one(label="inferd plain", model=model, load=32)
        if o and pl:
            t["%s_optimised_vs_plain_served_c32" % ("cnn" if model == "resnet18" else "tiny")] = {
                "value": o["inferences_per_s"] / pl["inferences_per_s"], "target": "(info)"}
    # XGBoost (breast_cancer, 300 trees): the served model against the C API called in-process (one thread each).
    inproc_xgb = [r for r in rows if r["label"] == "in-process" and r["model"] == "breast_cancer"]
    if inproc_xgb:
        best = max(inproc_xgb, key=lambda r: r["inferences_per_s"])
        for label, key in (("inferd", "xgb_served_vs_in_process_best_c32"),
                           ("inferd 16 rows", "xgb_served_16_rows_vs_in_process_best_c32")):
            r = one(label=label, model="breast_cancer", load=32)
            if r:
                t[key] = {"value": r["inferences_per_s"] / best["inferences_per_s"], "target": ">= 0.90",
                          "in_process_best_batch": best["batch_size"], "protocol": r["protocol"]}
    off = one(label="inferd batching off", model="resnet18", load=32)
    if off and inf_cnn32:
        t["cnn_batching_on_vs_off_c32"] = {"value": inf_cnn32["inferences_per_s"] / off["inferences_per_s"],
                                           "target": "(info)"}
    # gRPC next to HTTP on the same server (both send raw/binary tensors; tiny MLP HTTP rows at c>1 are JSON).
    for model, load, http_label in (("tiny_mlp", 1, "inferd binary"), ("tiny_mlp", 32, "inferd"),
                                    ("resnet18", 1, "inferd"), ("resnet18", 32, "inferd")):
        g, h = one(label="inferd grpc", model=model, load=load), one(label=http_label, model=model, load=load)
        if g and h:
            t["grpc_vs_http_%s_c%d" % (model, load)] = {
                "value": g["inferences_per_s"] / h["inferences_per_s"], "target": "(info)",
                "grpc_p50_us": g["p50_us"], "http_p50_us": h["p50_us"], "http": "%s %s" % (http_label, h["protocol"])}
    return {"targets": t, "fastapi_workers_tried": fastapi_tried}


def make_plots(rows, stem):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    files = []
    for model in ("tiny_mlp", "resnet18"):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        for label in sorted({r["label"] for r in rows if r["model"] == model and r["mode"] == "concurrency"}):
            pts = sorted((r["load"], r["inferences_per_s"], r["p50_us"], r["p99_us"]) for r in rows
                         if r["model"] == model and r["label"] == label and r["mode"] == "concurrency")
            if not pts:
                continue
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
            ax2.plot([p[0] for p in pts], [p[2] / 1000 for p in pts], marker="o", label=label + " p50")
            ax2.plot([p[0] for p in pts], [p[3] / 1000 for p in pts], marker="x", linestyle="--",
                     label=label + " p99")
        for r in rows:
            if r["model"] == model and r["mode"] == "in-process" and r["label"] == "in-process":
                ax1.axhline(r["inferences_per_s"], color="grey", linestyle=":", linewidth=0.8)
        ax1.set_xscale("log", base=2)
        ax1.set_xlabel("concurrency")
        ax1.set_ylabel("inferences / s")
        ax1.set_title("%s throughput (dotted: in-process per batch size)" % model)
        ax1.legend(fontsize=7)
        ax2.set_xscale("log", base=2)
        ax2.set_yscale("log")
        ax2.set_xlabel("concurrency")
        ax2.set_ylabel("latency (ms)")
        ax2.set_title("%s latency" % model)
        ax2.legend(fontsize=6)
        fig.tight_layout()
        f = "%s-%s.png" % (stem, model)
        fig.savefig(f, dpi=90)
        plt.close(fig)
        files.append(os.path.basename(f))
    return files


def markdown(rep, plots):
    m = rep["machine"]
    lines = ["# inferd benchmark report", "",
             "%s, %d cores; %s; torch %s; %s; %s%s. Suite took %s s." % (
                 m["cpu_model"], m["cores"], m["inferd"], m["torch"], m["nginx"], m["date"],
                 " (QUICK mode)" if m["quick"] else "", m["suite_seconds"]), "",
             "## Targets", "", "| measure | value | target | detail |", "|---|---|---|---|"]
    for k, v in rep["targets"].items():
        detail = ", ".join("%s=%s" % (a, (round(b, 1) if isinstance(b, float) else b)) for a, b in v.items()
                           if a not in ("value", "target"))
        lines.append("| %s | %.2f | %s | %s |" % (k, v["value"], v["target"], detail))
    lines += ["", "FastAPI worker counts tried: %s (the best is used for each ratio)." % rep["fastapi_workers_tried"],
              "", "## All measurements", "",
              "| label | model | mode | load | protocol | batch | infer/s | p50 us | p90 us | p99 us | max us | errors"
              " | server queue us | server compute us | avg batch | stable |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rep["rows"]:
        s = r.get("server") or {}
        lines.append("| %s | %s | %s | %g | %s | %d | %.1f | %.0f | %.0f | %.0f | %.0f | %d | %s | %s | %s | %s |" % (
            r["label"], r["model"], r["mode"], r["load"], r["protocol"], r["batch_size"], r["inferences_per_s"],
            r["p50_us"], r["p90_us"], r["p99_us"], r["max_us"], r["errors"],
            "%.0f" % s["queue_us"] if s else "-", "%.0f" % s["compute_infer_us"] if s else "-",
            "%.2f" % s["avg_batch_rows"] if s else "-", "yes" if r["stable"] else "no"))
    lines += [""] + ["![%s](%s)" % (p, p) for p in plots]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
