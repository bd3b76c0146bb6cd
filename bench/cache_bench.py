#!/usr/bin/python3
"""Response cache benchmark (`make bench-cache`, issue 15's targets), ratios measured in one run:

  unique inputs (every request misses: 20,000 distinct inputs cycling through a 1 MiB cache, so entries are
  evicted before they come back): throughput with the cache on vs off at concurrency 32 (target >= 0.95x);
  repeated inputs (4 inputs, all hits after the first): throughput and hit latency, cache on vs off.

The model is a tiny TorchScript MLP (16 -> 32 -> 4) with dynamic batching; the same load generator (`inferd bench`,
v2 JSON) drives both servers, one at a time. Writes bench/results/<date>-<host>-cache.{json,md}.

Usage: cache_bench.py --inferd build/src/inferd [--quick]
"""
import argparse
import datetime
import json
import os
import platform
import sys
import tempfile

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402

torch.set_num_threads(1)


def make_repo(repo):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    os.makedirs(os.path.join(repo, "mlp", "1"))
    torch.jit.script(m).save(os.path.join(repo, "mlp", "1", "model.pt"))
    with open(os.path.join(repo, "mlp", "config.pbtxt"), "w") as f:
        f.write('platform: "pytorch_libtorch"\nmax_batch_size: 32\n'
                'input [ { name: "input" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
                'output [ { name: "output" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                'dynamic_batching { }\nresponse_cache { enable: true }\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out-dir", default=os.path.join(rb.ROOT, "bench", "results"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="inferd-cache-bench-")
    repo = os.path.join(work, "repo")
    make_repo(repo)
    rng = np.random.default_rng(1)
    unique = os.path.join(work, "unique.json")
    with open(unique, "w") as f:
        json.dump({"data": [{"input": {"content": rng.standard_normal(16).astype(np.float32).tolist(),
                                       "shape": [1, 16]}} for _ in range(20000)]}, f)
    s = rb.Suite(a, work)
    for tag, extra in (("off", []), ("on", ["--cache-config", "local,size=1048576"])):
        port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
        p = rb.Proc([a.inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port",
                     str(mport), "--grpc-port", str(gport), "--host", "127.0.0.1", "--log-level", "warn"] + extra,
                    port, "/v2/health/ready", os.path.join(work, "inferd-%s.log" % tag))
        try:
            s.bench("unique, cache %s" % tag, port, "mlp", ["--concurrency", "32", "--input-data", unique])
            s.bench("repeated, cache %s" % tag, port, "mlp", ["--concurrency", "1,32"])
        finally:
            p.stop()
    rows = {(r["label"], r["load"]): r for r in s.rows}
    unique_ratio = rows[("unique, cache on", 32)]["requests_per_s"] / rows[("unique, cache off", 32)]["requests_per_s"]
    rep32 = rows[("repeated, cache on", 32)]["requests_per_s"] / rows[("repeated, cache off", 32)]["requests_per_s"]
    hit_p50 = rows[("repeated, cache on", 1)]["p50_us"]
    miss_p50 = rows[("repeated, cache off", 1)]["p50_us"]
    date = datetime.date.today().isoformat()
    host = platform.node().split(".")[0] or "host"
    base = os.path.join(a.out_dir, "%s-%s-cache" % (date, host))
    os.makedirs(a.out_dir, exist_ok=True)
    lines = ["# Response cache benchmark %s (%s, %d CPUs)" % (date, host, os.cpu_count()), "",
             "| target | measured | wanted |", "|---|---|---|",
             "| unique inputs, throughput cache on / off at c32 | %.3fx | >= 0.95x |" % unique_ratio,
             "| repeated inputs, throughput cache on / off at c32 | %.2fx | (reported) |" % rep32,
             "| repeated inputs, p50 at c1: hit vs no cache | %.0f us vs %.0f us | (reported) |" % (hit_p50, miss_p50),
             "", "| label | concurrency | req/s | p50 us | p99 us |", "|---|---|---|---|---|"]
    lines += ["| %s | %d | %.0f | %.0f | %.0f |" % (r["label"], r["load"], r["requests_per_s"], r["p50_us"], r["p99_us"])
              for r in s.rows]
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(base + ".json", "w") as f:
        json.dump({"unique_ratio": unique_ratio, "repeated_ratio_c32": rep32, "rows": s.rows}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
