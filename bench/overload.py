#!/usr/bin/python3
"""Goodput under overload (`make bench-overload`): a compute-bound model on one
core is offered about 10x what it can serve; how much of its capacity still
goes to requests that succeed?

  1. capacity: closed loop (concurrency 4) against ResNet-18 with one instance
     and one intra-op thread, requests/s;
  2. overload: open loop (Poisson) at --factor x capacity for --seconds; the
     queue (max_queue_size 64) fills and the rest is refused with 503;
  3. goodput = successful requests/s during overload; the ratio to capacity is
     the figure (1.0 = overload costs the model nothing).

Each binary given with --inferd (e.g. before and after a change) is measured
alternately, --rounds times, by the same load generator (`inferd bench`).

Usage: overload.py --inferd build/src/inferd [--inferd OTHER] [--rounds 2] [--factor 10] [--seconds 10]
                   [--protocol v2-binary|v2-json]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import inferd_client as ic  # noqa: E402

CONFIG = """platform: "pytorch_libtorch"
max_batch_size: 1
input [ { name: "input" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 1000 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching { default_queue_policy { max_queue_size: 64 } }
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
"""


def make_repo(work):
    """ResNet-18 from the example models, served by one instance on one core."""
    examples = os.path.join(work, "examples")
    if not os.path.exists(os.path.join(examples, "resnet18", "1", "model.pt")):
        subprocess.check_call(["/usr/bin/python3", os.path.join(ROOT, "scripts", "make_examples.py"), examples],
                              stdout=subprocess.DEVNULL)
    repo = os.path.join(work, "repo")
    ic.remove_repository(repo)
    os.makedirs(os.path.join(repo, "resnet18", "1"))
    shutil.copy(os.path.join(examples, "resnet18", "1", "model.pt"), os.path.join(repo, "resnet18", "1"))
    with open(os.path.join(repo, "resnet18", "config.pbtxt"), "w") as f:
        f.write(CONFIG)
    return repo


PROTOCOL = "v2-binary"


def bench(client, port, *args):
    out = tempfile.mktemp(suffix=".json")
    proc = subprocess.run([client, "bench", "-m", "resnet18", "--url", "http://127.0.0.1:%d" % port,
                           "--protocol", PROTOCOL, "--output", out, *args], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise RuntimeError(proc.stderr)
    with open(out) as f:
        row = json.load(f)["rows"][0]
    os.unlink(out)
    return row


def measure(binary, client, repo, factor, seconds):
    server = ic.Server(binary, repo, "--http-threads", "1", "--intra-op-threads", "1", *(
        ["--control-state-dir", repo + ".state"] if "control-state-dir" in subprocess.run(
            [binary, "serve", "--help"], capture_output=True, text=True).stdout else []))
    try:
        cap = bench(client, server.port, "--concurrency", "4", "--warmup-s", "2", "--window-s", "4",
                    "--duration-s", "8")
        capacity = cap["requests_per_s"]
        over = bench(client, server.port, "--request-rate", "%.1f" % (capacity * factor), "--warmup-s", "2",
                     "--window-s", str(seconds), "--duration-s", str(seconds), "--max-connections", "256")
        return {"capacity": capacity, "offered": capacity * factor, "goodput": over["requests_per_s"],
                "errors_per_s": over["errors"] / over["duration_s"], "ratio": over["requests_per_s"] / capacity}
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", action="append", required=True, help="server binary (repeat to compare)")
    ap.add_argument("--client", help="inferd binary used as the load generator (default: the first --inferd)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--factor", type=float, default=10)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "inferd_overload"))
    ap.add_argument("--protocol", default="v2-binary", help="v2-binary | v2-json (a costlier body to decode)")
    ap.add_argument("--out", help="write the results as markdown here")
    a = ap.parse_args()
    global PROTOCOL
    PROTOCOL = a.protocol
    os.makedirs(a.work, exist_ok=True)
    repo = make_repo(a.work)
    client = a.client or a.inferd[0]
    results = {b: [] for b in a.inferd}
    for _ in range(a.rounds):
        for b in a.inferd:
            r = measure(b, client, repo, a.factor, a.seconds)
            results[b].append(r)
            print("%s: capacity %.1f req/s, offered %.0f, goodput %.1f req/s (%.2f of capacity), %.0f errors/s"
                  % (b, r["capacity"], r["offered"], r["goodput"], r["ratio"], r["errors_per_s"]), flush=True)
    lines = ["| binary | capacity req/s | goodput at %gx, req/s | goodput / capacity |" % a.factor, "|---|---|---|---|"]
    for b, rs in results.items():
        for r in rs:
            lines.append("| %s | %.1f | %.1f | %.2f |" % (re.sub(r".*/(\w+)/build/", r"\1/", b), r["capacity"],
                                                          r["goodput"], r["ratio"]))
    print("\n".join(lines))
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
