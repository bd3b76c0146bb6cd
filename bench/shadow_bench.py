#!/usr/bin/python3
"""Shadow traffic benchmark (`make bench-shadow`, issue 15's target), ratios measured in one run:

  the client's p99 (and throughput) with a shadow version that answers errors, or that is 10x slower, compared
  with no shadow at all (target: p99 within +10%). The served model is a TorchScript MLP (64 -> 256 -> 256 -> 8)
  with dynamic batching; version 2 raises on every request; version 3 runs the same layers 10 times (10x the
  CPU of version 1). Shadows are mirrored at 100% and, for the slow version, also at 10%; in-flight shadows
  are bounded by --shadow-max-in-flight (default 16). Clients: `inferd bench`, v2 JSON, open loop at 3,000
  requests/s (Poisson; the box has spare CPU, as a production server does) and closed loop at concurrency 1.
  At saturation a 100% mirror necessarily takes CPU from the clients: that is not what the target is about.
  Writes bench/results/<date>-<host>-shadow.{json,md}.

Usage: shadow_bench.py --inferd build/src/inferd [--quick]
"""
import argparse
import datetime
import http.client
import json
import os
import platform
import sys
import tempfile

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402

torch.set_num_threads(1)
RATE = 3000  # requests/s, open loop: about a tenth of what one version serves on 2 cores at saturation


class Mlp(nn.Module):
    def __init__(self, repeat: int):
        super().__init__()
        self.repeat = repeat
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8))

    def forward(self, x):
        y = self.net(x)
        for _ in range(self.repeat - 1):
            y = y + 0.0 * self.net(x)
        return y


class Fails(nn.Module):
    def forward(self, x):
        if bool(x.numel() >= 0):
            raise RuntimeError("the shadow version fails")
        return x[:, :8]


def make_repo(repo):
    torch.manual_seed(0)
    fast = Mlp(1)
    slow = Mlp(10)
    slow.load_state_dict(fast.state_dict())
    for v, m in ((1, fast), (2, Fails()), (3, slow)):
        os.makedirs(os.path.join(repo, "mlp", str(v)))
        torch.jit.script(m).save(os.path.join(repo, "mlp", str(v), "model.pt"))
    with open(os.path.join(repo, "mlp", "config.pbtxt"), "w") as f:
        f.write('platform: "pytorch_libtorch"\nmax_batch_size: 32\nversion_policy { all { } }\n'
                'input [ { name: "input" data_type: TYPE_FP32 dims: [ 64 ] } ]\n'
                'output [ { name: "output" data_type: TYPE_FP32 dims: [ 8 ] } ]\n'
                'dynamic_batching { }\n')


def set_policy(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("PUT" if body else "DELETE", "/v2/repository/models/mlp/traffic", body=body)
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise SystemExit("traffic policy %r: HTTP %d %s" % (body, r.status, data))


def shadow_counts(mport):
    c = http.client.HTTPConnection("127.0.0.1", mport, timeout=60)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return [line for line in text.splitlines() if line.startswith("inferd_shadow_requests_total")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out-dir", default=os.path.join(rb.ROOT, "bench", "results"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="inferd-shadow-bench-")
    repo = os.path.join(work, "repo")
    make_repo(repo)
    s = rb.Suite(a, work)
    port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
    p = rb.Proc([a.inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port",
                 str(mport), "--grpc-port", str(gport), "--host", "127.0.0.1", "--log-level", "error",
                 "--control-state-dir", os.path.join(work, "state")],
                port, "/v2/health/ready", os.path.join(work, "inferd.log"))
    scenarios = [("no shadow", None),
                 ("shadow errors, 100%", '{"split": {"1": 100}, "shadow": {"target": "2", "percent": 100}}'),
                 ("shadow 10x slower, 100%", '{"split": {"1": 100}, "shadow": {"target": "3", "percent": 100}}'),
                 ("shadow 10x slower, 10%", '{"split": {"1": 100}, "shadow": {"target": "3", "percent": 10}}'),
                 ("no shadow (again)", None)]
    try:
        for label, policy in scenarios:
            set_policy(port, policy)
            s.bench(label, port, "mlp", ["--request-rate", str(RATE)])
            s.bench(label, port, "mlp", ["--concurrency", "1"])
        counts = shadow_counts(mport)
    finally:
        p.stop()
    rows = {(r["label"], r["load"]): r for r in s.rows}
    date = datetime.date.today().isoformat()
    host = platform.node().split(".")[0] or "host"
    out = os.path.join(a.out_dir, "%s-%s-shadow" % (date, host))
    os.makedirs(a.out_dir, exist_ok=True)
    lines = ["# Shadow traffic benchmark %s (%s, %d CPUs)" % (date, host, os.cpu_count()), "",
             "| shadow | load | client p99 / no shadow | wanted | client p50 / no shadow |", "|---|---|---|---|---|"]
    ratios = {}
    for load in (RATE, 1):
        base = [rows[(l, load)] for l in ("no shadow", "no shadow (again)")]
        base_p99 = min(b["p99_us"] for b in base)
        base_p50 = min(b["p50_us"] for b in base)
        what = "%d req/s" % load if load == RATE else "c1"
        for label, _ in scenarios[1:4]:
            r = rows[(label, load)]
            ratios["%s @ %s" % (label, what)] = r["p99_us"] / base_p99
            lines.append("| %s | %s | %.2fx | <= 1.10x | %.2fx |" % (label, what, r["p99_us"] / base_p99,
                                                                   r["p50_us"] / base_p50))
    lines += ["", "| label | load (req/s, or clients) | req/s | p50 us | p99 us |", "|---|---|---|---|---|"]
    lines += ["| %s | %s | %.0f | %.0f | %.0f |" % (r["label"], r["load"], r["requests_per_s"], r["p50_us"], r["p99_us"])
              for r in s.rows]
    lines += ["", "Shadow outcomes over the run:", "", "```"] + counts + ["```"]
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(out + ".json", "w") as f:
        json.dump({"ratios": ratios, "rows": s.rows, "shadow_metrics": counts}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
