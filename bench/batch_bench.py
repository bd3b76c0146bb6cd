#!/usr/bin/python3
"""Batch job benchmark (`make bench-batch`, issue 16's targets), ratios measured in one run:

  batch-job rows/s (`inferd batch`, CSV or JSON Lines in, SQLite out, through the model's own scheduler) over the
  in-process best-batch throughput of the same model (`inferd bench --in-process`, the best of batch 1..max):
  target >= 0.9 for the example CNN (resnet18), >= 0.5 for the tiny MLP (16 -> 32 -> 4) where database writes dominate;
  online p99 of another model (digits, closed loop, one client) while a job runs on the server vs without;
  hybrid hit p50 / online p50 on the CNN: resnet18 with precomputed.* parameters over the table its batch job
  wrote, one client (v2-binary): a key with a row (answered from SQLite; the request still carries the 602 KB
  image), a key without one (looked up, then run online), no key (online as usual), and a key with no inputs
  (only the table is asked: measured with python's http.client, as `inferd bench` always sends inputs).

The rate of a job is the one `inferd batch` reports: rows committed / time from its first row to its last commit
(the server start and the model load are not counted). Writes bench/results/<date>-<host>-batch.{json,md}.

Usage: batch_bench.py --inferd build/src/inferd [--quick]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402


def job_rate(a, repo, spec, work, tag):
    path = os.path.join(work, "job-%s.json" % tag)
    with open(path, "w") as f:
        json.dump(spec, f)
    cmd = [a.inferd, "batch", "--model-repository", repo, "--job", path, "--progress", "none"]
    print("  $", " ".join(cmd[1:]), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
    m = re.search(r"in ([\d.]+) s\n  rows: ([\d,]+) done", p.stderr)
    seconds, rows = float(m.group(1)), int(m.group(2).replace(",", ""))
    return rows / seconds, rows, seconds


def best_in_process(s, repo, model, sizes, threads):
    rows = s.in_process("in-process %s" % model, repo, model, sizes, threads)
    best = max(rows, key=lambda r: r["inferences_per_s"])
    return best["inferences_per_s"], best["batch_size"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out-dir", default=os.path.join(rb.ROOT, "bench", "results"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="inferd-batch-bench-")
    repo = os.path.join(work, "repo")
    subprocess.run([rb.PY,
                    os.path.join(rb.ROOT, "scripts", "make_examples.py"), repo, "--skip-chat"], check=True, stdout=subprocess.DEVNULL)
    rng = np.random.default_rng(1)
    s = rb.Suite(a, work)
    results = {}

    # Tiny MLP: 16 features per CSV row.
    n_mlp = 50000 if a.quick else 200000
    x = rng.standard_normal((n_mlp, 16)).astype(np.float32)
    with open(os.path.join(work, "mlp.csv"), "w") as f:
        f.write("id," + ",".join("f%d" % i for i in range(16)) + "\n")
        for i, row in enumerate(x):
            f.write("k%d,%s\n" % (i, ",".join("%.7g" % v for v in row)))
    mlp_spec = {"model": "tiny_mlp", "source": {"type": "csv", "path": os.path.join(work, "mlp.csv")},
                "sink": {"type": "sqlite", "path": os.path.join(work, "mlp.db"), "table": "preds"}, "key": "id",
                "inputs": {"input": ["f%d" % i for i in range(16)]}, "max_in_flight": 8, "commit_rows": 5000}
    results["tiny_mlp"] = {"job": job_rate(a, repo, mlp_spec, work, "mlp"),
                           "in_process": best_in_process(s, repo, "tiny_mlp", "1,8,32", 1)}

    # The CNN: images as JSON arrays in a JSON Lines file.
    n_cnn = 32 if a.quick else 96
    with open(os.path.join(work, "images.jsonl"), "w") as f:
        for i in range(n_cnn):
            img = rng.standard_normal(3 * 224 * 224).astype(np.float32)
            f.write(json.dumps({"id": "img%d" % i, "image": [float("%.6g" % v) for v in img]}) + "\n")
    cnn_spec = {"model": "resnet18", "source": {"type": "jsonl", "path": os.path.join(work, "images.jsonl")},
                "sink": {"type": "sqlite", "path": os.path.join(work, "cnn.db"), "table": "preds"}, "key": "id",
                "inputs": {"image": "image"}, "max_in_flight": 4, "commit_rows": 16}
    results["resnet18"] = {"job": job_rate(a, repo, cnn_spec, work, "cnn"),
                           "in_process": best_in_process(s, repo, "resnet18", "1,2,4,8", 2)}

    # Online p99 of digits with and without a job running on the same server.
    jobs_dir = os.path.join(work, "jobs")
    os.makedirs(jobs_dir)
    os.replace(os.path.join(work, "mlp.csv"), os.path.join(jobs_dir, "mlp.csv"))
    with open(os.path.join(work, "jobs.json"), "w") as f:
        json.dump({"allowed_dirs": [jobs_dir]}, f)
    port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
    p = rb.Proc([a.inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port", str(mport),
                 "--grpc-port", str(gport), "--host", "127.0.0.1", "--log-level", "warn", "--jobs-config",
                 os.path.join(work, "jobs.json"), "--control-state-dir", os.path.join(work, "state")],
                port, "/v2/health/ready", os.path.join(work, "inferd-online.log"))
    try:
        import http.client
        import threading
        quiet = s.bench("digits, no job", port, "digits", ["--concurrency", "1"])[0]
        # Jobs back to back for the whole measurement (one tiny_mlp job takes about a second here).
        spec = dict(mlp_spec, source={"type": "csv", "path": "mlp.csv"},
                    sink={"type": "sqlite", "path": "online.db", "table": "preds"}, max_in_flight=4)
        stop = threading.Event()
        finished = []

        def keep_busy():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            while not stop.is_set():
                c.request("POST", "/v2/jobs", json.dumps(spec))
                r = c.getresponse()
                job = json.loads(r.read())
                assert r.status == 201, job
                while True:
                    c.request("GET", "/v2/jobs/" + job["id"])
                    doc = json.loads(c.getresponse().read())
                    if doc["state"] not in ("queued", "running"):
                        finished.append(doc["state"])
                        break
                    if stop.is_set():
                        c.request("DELETE", "/v2/jobs/" + job["id"])
                        c.getresponse().read()
                    time.sleep(0.05)  # the status poll's interval

        t = threading.Thread(target=keep_busy)
        t.start()
        try:
            busy = s.bench("digits, jobs running", port, "digits", ["--concurrency", "1"])[0]
        finally:
            stop.set()
            t.join()
        state = "%d jobs ran during the window (%s)" % (len(finished), ", ".join(sorted(set(finished))))
    finally:
        p.stop()

    # Hybrid: resnet18 answering from the table its job wrote (cnn.db, keys img0..).
    hrepo = os.path.join(work, "hybrid_repo")
    os.makedirs(hrepo)
    shutil.copytree(os.path.join(repo, "resnet18"), os.path.join(hrepo, "resnet18"))
    with open(os.path.join(hrepo, "resnet18", "config.pbtxt"), "a") as f:
        for k, v in (("connection", "cnn"), ("table", "preds"), ("key_parameter", "id")):
            f.write('\nparameters { key: "precomputed.%s" value: { string_value: "%s" } }\n' % (k, v))
    with open(os.path.join(work, "hybrid.json"), "w") as f:
        json.dump({"connections": {"cnn": {"type": "sqlite", "path": os.path.join(work, "cnn.db")}}}, f)
    port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
    p = rb.Proc([a.inferd, "serve", "--model-repository", hrepo, "--http-port", str(port), "--metrics-port",
                 str(mport), "--grpc-port", str(gport), "--host", "127.0.0.1", "--log-level", "warn", "--jobs-config",
                 os.path.join(work, "hybrid.json"), "--control-state-dir", os.path.join(work, "hstate")],
                port, "/v2/health/ready", os.path.join(work, "inferd-hybrid.log"))
    try:
        common = ["--concurrency", "1", "--protocol", "v2-binary"]
        hit = s.bench("resnet18 hybrid hit", port, "resnet18", common + ["--request-parameter", "id:img0:string"])[0]
        miss = s.bench("resnet18 hybrid miss (online)", port, "resnet18",
                       common + ["--request-parameter", "id:nobody:string"])[0]
        online = s.bench("resnet18 online, no key", port, "resnet18", common)[0]
        # A key and no inputs (only the table is asked): `inferd bench` always sends inputs, so a plain
        # http.client loop measures it (one connection, 1000 requests after 100 warm-up).
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        body = json.dumps({"inputs": [], "parameters": {"id": "img0"}})
        lat = []
        for i in range(1100):
            t0 = time.perf_counter()
            c.request("POST", "/v2/models/resnet18/infer", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            assert r.status == 200
            if i >= 100:
                lat.append((time.perf_counter() - t0) * 1e6)
        c.close()
        key_only_p50 = float(np.percentile(lat, 50))
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=30) as r:
            counts = dict(re.findall(r'inferd_precomputed_lookups_total\{model="resnet18",result="(\w+)"\} (\d+)',
                                     r.read().decode()))
    finally:
        p.stop()

    date = datetime.date.today().isoformat()
    host = platform.node().split(".")[0] or "host"
    base = os.path.join(a.out_dir, "%s-%s-batch" % (date, host))
    os.makedirs(a.out_dir, exist_ok=True)
    lines = ["# Batch job benchmark %s (%s, %d CPUs)" % (date, host, os.cpu_count()), "",
             "| target | measured | wanted |", "|---|---|---|"]
    for model, want in (("resnet18", 0.9), ("tiny_mlp", 0.5)):
        (rate, rows, secs), (best, bs) = results[model]["job"], results[model]["in_process"]
        lines.append("| %s: batch-job rows/s over in-process best-batch inferences/s | %.0f / %.0f (batch %d) = %.3fx "
                     "| >= %.1fx |" % (model, rate, best, bs, rate / best, want))
    lines.append("| online p99 of digits (c1) with a job running / without | %.0f us / %.0f us = %.2fx "
                 "(%s) | (reported) |"
                 % (busy["p99_us"], quiet["p99_us"], busy["p99_us"] / quiet["p99_us"], state))
    lines.append("| resnet18 hybrid hit p50 / online p50 (c1, v2-binary) | %.0f us / %.0f us = %.3fx | (reported) |"
                 % (hit["p50_us"], online["p50_us"], hit["p50_us"] / online["p50_us"]))
    lines.append("| resnet18 hybrid hit with a key and no inputs (JSON answer; python http.client) p50 / online p50 "
                 "| %.0f us / %.0f us = %.4fx | (reported) |" % (key_only_p50, online["p50_us"],
                                                                  key_only_p50 / online["p50_us"]))
    lines.append("| resnet18 hybrid miss p50 (looked up, then online) / online p50 | %.0f us / %.0f us = %.3fx "
                 "(lookups: %s) | (reported) |" % (miss["p50_us"], online["p50_us"], miss["p50_us"] / online["p50_us"],
                                                   ", ".join("%s %s" % kv for kv in sorted(counts.items()))))
    lines += ["", "| run | rows | seconds | rows/s |", "|---|---|---|---|"]
    for model in results:
        rate, rows, secs = results[model]["job"]
        lines.append("| inferd batch %s | %d | %.2f | %.0f |" % (model, rows, secs, rate))
    lines += ["", "| label | load | batch | inferences/s | p50 us | p99 us |", "|---|---|---|---|---|---|"]
    lines += ["| %s | %d | %d | %.0f | %.0f | %.0f |" % (r["label"], r["load"], r["batch_size"], r["inferences_per_s"],
                                                         r["p50_us"], r["p99_us"]) for r in s.rows]
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(base + ".json", "w") as f:
        json.dump({"results": results, "rows": s.rows}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
