#!/usr/bin/python3
"""Many models per box (issue 4): indexing, Zipf traffic under a memory budget, hot swaps.

Reports (never asserts):
  1. start-up indexing of N generated models (on-demand residency), index call time, idle RSS;
  2. Zipf traffic over all N with the budget holding ~--resident of them: first-touch (cold) and
     repeat request latency, server load durations, evictions/s, RSS against budget + fixed overhead;
  3. hot swap under load: --swaps versions published (stable label moved) and every other one
     rolled back while clients send requests: failed requests and the latency blip.

Usage: many_models.py --inferd build/src/inferd [--models 10000] [--resident 1000] [--seconds 30]
"""
import argparse
import bisect
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
import inferd_client as ic  # noqa: E402
import make_fixtures  # noqa: E402

BODY = json.dumps({"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0.5] * 8}]})


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def metric(text, name):
    m = re.search(r"^%s ([0-9.e+]+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else float("nan")


def hist_quantile(text, name, q):
    """Upper bound of the bucket holding quantile q (Prometheus cumulative buckets)."""
    buckets = [(float(le) if le != "+Inf" else float("inf"), float(v))
               for le, v in re.findall(r'^%s_bucket\{le="([^"]+)"\} ([0-9.e+]+)$' % re.escape(name), text, re.M)]
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    target = q * buckets[-1][1]
    for le, v in buckets:
        if v >= target:
            return le
    return float("inf")


SERVER_ARGS = []  # --server-arg: passed to every server this bench starts


def start(inferd, repo, *extra):
    t0 = time.time()
    server = ic.Server(inferd, repo, *extra, *SERVER_ARGS)
    ready_s = time.time() - t0
    indexed = [float(m.group(1)) for line in server.log
               for m in [re.search(r"indexed \d+ models for on-demand loading in (\d+) ms", line)] if m]
    return server, ready_s, (indexed[0] if indexed else float("nan"))


def phase_index(args, repo):
    server, ready_s, index_ms = start(args.inferd, repo, "--model-residency", "on-demand")
    try:
        calls = []
        for _ in range(5):
            t = time.perf_counter()
            st, index = server.post_json("/v2/repository/index", {})
            calls.append((time.perf_counter() - t) * 1e3)
        assert st == 200 and len(index) == args.models, (st, len(index))
        rss_idle = metric(server.metrics(), "process_resident_memory_bytes")
        # Size one model as the server measures it (not the first load: it also pays libtorch's one-time set-up).
        for name in ("tenant_00001", "tenant_00002"):
            server.post_json("/v2/models/%s/infer" % name, json.loads(BODY))
        st, listing = server.get_json("/v2/repository/models")
        size = [m["resident_bytes"] for m in listing["models"] if m["name"] == "tenant_00002"][0]
    finally:
        server.stop()
    return {"ready_s": ready_s, "index_ms": index_ms, "index_call_ms": pct(calls, 50), "rss_idle": rss_idle,
            "model_bytes": size}


def phase_zipf(args, repo, model_bytes, rss_idle):
    budget = int(model_bytes * args.resident)
    server, _, _ = start(args.inferd, repo, "--model-residency", "on-demand", "--memory-budget", str(budget),
                         "--model-load-threads", "2")
    n = args.models
    weights = [1.0 / (r + 1) ** args.zipf_s for r in range(n)]
    cdf, acc = [], 0.0
    for w in weights:
        acc += w
        cdf.append(acc)
    perm = list(range(n))
    random.Random(7).shuffle(perm)  # popularity is not name order
    stop = threading.Event()
    lat_first, lat_repeat, lat_hot, failures, rss = [], [], [], [], []
    seen, seen_lock = set(), threading.Lock()

    def client(seed):
        rnd = random.Random(seed)
        conn = server.conn()
        while not stop.is_set():
            rank = bisect.bisect_left(cdf, rnd.random() * acc)
            m = perm[rank]
            name = "tenant_%05d" % m
            with seen_lock:
                first = name not in seen
                seen.add(name)
            t = time.perf_counter()
            conn.request("POST", "/v2/models/%s/infer" % name, body=BODY)
            r = conn.getresponse()
            r.read()
            dt = (time.perf_counter() - t) * 1e3
            if r.status != 200:
                failures.append(r.status)
            (lat_first if first else lat_repeat).append(dt)
            if not first and rank < 100:
                lat_hot.append(dt)  # the 100 most popular models: requested often enough to stay loaded
        conn.close()

    def monitor():
        while not stop.wait(1.0):
            rss.append(metric(server.metrics(), "process_resident_memory_bytes"))

    try:
        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        threads.append(threading.Thread(target=monitor))
        t0 = time.time()
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        text = server.metrics()
    finally:
        server.stop()
    return {
        "budget": budget, "requests": len(lat_first) + len(lat_repeat), "failures": len(failures),
        "rps": (len(lat_first) + len(lat_repeat)) / elapsed, "distinct": len(seen),
        "first_p50": pct(lat_first, 50), "first_p99": pct(lat_first, 99),
        "repeat_p50": pct(lat_repeat, 50), "repeat_p99": pct(lat_repeat, 99),
        "hot_p50": pct(lat_hot, 50), "hot_p99": pct(lat_hot, 99), "hot_n": len(lat_hot),
        "load_p50_le": hist_quantile(text, "inferd_model_load_duration_seconds", 0.5) * 1e3,
        "load_p99_le": hist_quantile(text, "inferd_model_load_duration_seconds", 0.99) * 1e3,
        "load_mean": metric(text, "inferd_model_load_duration_seconds_sum") /
        max(1, metric(text, "inferd_model_load_duration_seconds_count")) * 1e3,
        "cold_starts": metric(text, "inferd_model_cold_starts_total"),
        "evictions_per_s": metric(text, "inferd_model_evictions_total") / elapsed,
        "loaded_end": metric(text, "inferd_models_loaded"), "used_end": metric(text, "inferd_memory_budget_used_bytes"),
        "rss_max": max(rss) if rss else float("nan"), "rss_idle": rss_idle,
    }


def phase_swaps(args, workdir):
    repo = os.path.join(workdir, "swap_repo")
    ic.remove_repository(repo)
    os.makedirs(os.path.join(repo, "swap"))
    with open(os.path.join(repo, "swap", "config.pbtxt"), "w") as f:
        f.write('platform: "pytorch_libtorch"\nmax_batch_size: 8\n'
                'input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]\n'
                'output [ { name: "y" data_type: TYPE_FP32 dims: [ 8 ] } ]\ndynamic_batching { }\n')

    def publish(k):
        d = os.path.join(repo, "swap", str(k))
        os.makedirs(d, exist_ok=True)
        torch.jit.script(make_fixtures.Scale(float(k))).save(os.path.join(d, "model.pt"))

    for k in range(1, args.swaps + 2):  # files first: the swap phase measures the server, not torch.jit.save
        publish(k)
    for k in range(2, args.swaps + 2):
        os.rename(os.path.join(repo, "swap", str(k)), os.path.join(repo, "swap", "0hidden%d" % k))
    server, _, _ = start(args.inferd, repo, "--model-control-mode", "explicit", "--load-model", "swap")
    stop = threading.Event()
    samples, failures = [], []  # (time, latency ms)

    def client():
        conn = server.conn()
        while not stop.is_set():
            t = time.perf_counter()
            conn.request("POST", "/v2/models/swap/infer", body=BODY)
            r = conn.getresponse()
            r.read()
            samples.append((t, (time.perf_counter() - t) * 1e3))
            if r.status != 200:
                failures.append(r.status)
        conn.close()

    try:
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(3)
        swap_start = time.perf_counter()
        rollbacks = 0
        for k in range(2, args.swaps + 2):
            os.rename(os.path.join(repo, "swap", "0hidden%d" % k), os.path.join(repo, "swap", str(k)))
            st, _, body = server.request("PUT", "/v2/repository/models/swap/labels/stable",
                                         json.dumps({"version": k}))
            assert st == 200, body
            if k % 2 == 1:
                st, body = server.post_json("/v2/repository/models/swap/rollback", {})
                assert st == 200, body
                rollbacks += 1
        swap_end = time.perf_counter()
        time.sleep(1)
        stop.set()
        for t in threads:
            t.join()
    finally:
        stop.set()
        server.stop()
    before = [d for t, d in samples if t < swap_start]
    during = [d for t, d in samples if swap_start <= t <= swap_end]
    return {"versions": args.swaps, "rollbacks": rollbacks, "swap_s": swap_end - swap_start,
            "requests": len(samples), "failures": len(failures),
            "before_p50": pct(before, 50), "before_p99": pct(before, 99),
            "during_p50": pct(during, 50), "during_p99": pct(during, 99), "during_max": max(during or [0])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--workdir", default="/tmp/inferd-many-models")
    ap.add_argument("--models", type=int, default=10000)
    ap.add_argument("--resident", type=int, default=1000, help="budget = this many models' measured size")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--zipf-s", type=float, default=1.0)
    ap.add_argument("--swaps", type=int, default=50)
    ap.add_argument("--out", help="append the markdown report to this file")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="an extra inferd serve argument (repeat; e.g. --server-arg=--model-parameter "
                         "--server-arg=OPTIMIZE_FOR_INFERENCE=false)")
    args = ap.parse_args()
    SERVER_ARGS.extend(args.server_arg)
    repo = os.path.join(args.workdir, "tenants_%d" % args.models)
    t0 = time.time()
    if not os.path.isdir(os.path.join(repo, "tenant_%05d" % (args.models - 1))):
        ic.remove_repository(repo)
        subprocess.check_call([sys.executable, os.path.join(HERE, "make_tenant_models.py"), repo, str(args.models)])
    gen_s = time.time() - t0
    a = phase_index(args, repo)
    z = phase_zipf(args, repo, a["model_bytes"], a["rss_idle"])
    s = phase_swaps(args, args.workdir)
    mib = 1 << 20
    over = z["rss_max"] - z["budget"] - a["rss_idle"]
    lines = [
        "## Many models per box (%d models, Zipf s=%.1f, %d clients, %.0f s)%s" % (
            args.models, args.zipf_s, args.clients, args.seconds,
            (" with `%s`" % " ".join(SERVER_ARGS)) if SERVER_ARGS else ""),
        "",
        "| measurement | value | target |",
        "|---|---|---|",
        "| generate repository (make_tenant_models.py) | %.1f s (skipped if present) | |" % gen_s,
        "| start-up indexing (server log) | %.0f ms | <= 3 s |" % a["index_ms"],
        "| process start to ready | %.2f s | |" % a["ready_s"],
        "| POST /v2/repository/index (%d entries), median of 5 | %.1f ms | |" % (args.models, a["index_call_ms"]),
        "| RSS idle, nothing loaded | %.0f MiB | |" % (a["rss_idle"] / mib),
        "| one model's measured size | %.1f KiB | |" % (a["model_bytes"] / 1024),
        "| memory budget (%d x model size) | %.1f MiB | |" % (args.resident, z["budget"] / mib),
        "| requests / failed | %d / %d (%.0f req/s) | 0 failed |" % (z["requests"], z["failures"], z["rps"]),
        "| distinct models requested | %d | |" % z["distinct"],
        "| first-touch request (cold: waits for a load) p50 / p99 | %.1f / %.1f ms | p50 <= 5 ms |" % (
            z["first_p50"], z["first_p99"]),
        "| repeat request (warm, or re-load after eviction) p50 / p99 | %.1f / %.1f ms | p99 <= 20 ms |" % (
            z["repeat_p50"], z["repeat_p99"]),
        "| warm: repeat requests to the 100 most popular models (%d) p50 / p99 | %.1f / %.1f ms | p99 <= 20 ms |" % (
            z["hot_n"], z["hot_p50"], z["hot_p99"]),
        "| server load duration mean; p50 / p99 bucket bound | %.1f ms; <= %.1f / <= %.1f ms | |" % (
            z["load_mean"], z["load_p50_le"], z["load_p99_le"]),
        "| cold starts (requests that waited) | %d | |" % z["cold_starts"],
        "| evictions / s | %.1f | |" % z["evictions_per_s"],
        "| models loaded at the end; accounted bytes | %d; %.1f MiB | <= budget |" % (z["loaded_end"],
                                                                                  z["used_end"] / mib),
        "| RSS max during traffic | %.0f MiB = idle %.0f + budget %.0f + %.0f unaccounted | |" % (
            z["rss_max"] / mib, a["rss_idle"] / mib, z["budget"] / mib, over / mib),
        "| hot swap: versions published / rolled back | %d / %d in %.1f s | |" % (s["versions"], s["rollbacks"],
                                                                              s["swap_s"]),
        "| hot swap: requests / failed | %d / %d | 0 failed |" % (s["requests"], s["failures"]),
        "| hot swap: latency p50 / p99 before | %.2f / %.2f ms | |" % (s["before_p50"], s["before_p99"]),
        "| hot swap: latency p50 / p99 / max during swaps | %.2f / %.2f / %.1f ms | |" % (
            s["during_p50"], s["during_p99"], s["during_max"]),
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        with open(args.out, "a") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
