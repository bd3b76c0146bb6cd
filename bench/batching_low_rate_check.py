#!/usr/bin/python3
"""A longer look at one rate of `make bench-batching`: tiny_mlp (or --model resnet18) at ~4,900 req/s by default
(10% of its capacity on a 2-core VM) served with the best fixed delay of that rate (--best, default 0 us), a second
identical model with that delay, adaptive batching and (unless --without-nobatch) no batching, in rounds of 5 s each
(resnet18: 20 s), order rotated. Prints
each setting's median p50 and p99; per-round (paired) ratios with a bootstrap interval: adaptive's p50 over no
batching's, adaptive's p99 over the fixed delay's, and the two identical fixed-delay models' (what noise alone
gives); and the server's own mean time per request (queue, compute; from the statistics endpoint), which leaves out
the client and the network. The batching bench's comparisons rest on 5 rounds; this repeats them with more.
--with-cpu-aware adds adaptive batching with batching.cpu_aware true (the CPU a wait saves weighed by the machine's
load) and compares it with plain adaptive batching. It also prints the machine's CPU busy fraction over the rounds (/proc/stat) and the CPU
utilization adaptive batching last weighed.

Every run has `inferd bench --host-stall-probe` on: on a VM the host takes the CPUs away now and then (on the 2-core
VMs here: every 1.5-2 s, for 10-70 ms, the CPU running 5-15x slower), and each such stall puts a backlog, and so a
latency tail, on every setting alike. Besides the p99 over all requests the script compares the p99 of the requests
sent outside the stalls and 200 ms after them ("outside stalls"), and prints how much of each round the host stalled.

Usage: batching_low_rate_check.py --inferd build/src/inferd [--model tiny_mlp] [--rate 4900 | --load 0.1] [--best 0]
                                  [--without-nobatch] [--with-cpu-aware] [--rounds 10]
                                  [--server-cpus 0 --client-cpus 1]
"""
import argparse
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import batching_bench as bb  # noqa: E402
import run_bench as rb  # noqa: E402


def paired(runs, a, b, key):
    return bb.paired_text(bb.paired(runs, a, b, key))


def cpu_ticks():
    """(busy, total) jiffies of all CPUs, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    busy = sum(v[:8]) - idle
    return busy, busy + idle


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--rate", default="4900", help="requests per second")
    ap.add_argument("--model", default="tiny_mlp", choices=sorted(bb.SWEEP),
                    help="the model; rounds run DURATION_S of the batching bench per setting (5 s for tiny_mlp)")
    ap.add_argument("--load", type=float, help="instead of --rate: this fraction of the model's closed-loop "
                    "capacity, measured first as the batching bench does (0.1 = its low rate, 0.4 its medium)")
    ap.add_argument("--best", type=int, default=0, choices=sorted({d for ds in bb.SWEEP.values() for d in ds}),
                    help="the fixed delay (us) to compare with: the best one the batching bench found at this rate")
    ap.add_argument("--without-nobatch", action="store_true",
                    help="leave out no batching (at high rates it falls behind and its backlog disturbs the rest)")
    ap.add_argument("--with-cpu-aware", action="store_true",
                    help="add adaptive batching with batching.cpu_aware true")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--server-cpus", help="taskset CPU list for the server (e.g. 0)")
    ap.add_argument("--client-cpus", help="taskset CPU list for the load generator (e.g. 1)")
    a = ap.parse_args()
    a.quick = False
    work, repo = bb.variant_repository("inferd-low-rate-check-")
    m = a.model
    if a.best not in bb.SWEEP[m]:
        ap.error("--best for %s: one of %s" % (m, bb.SWEEP[m]))
    fixed = "%s_fixed_%d" % (m, a.best)
    # fixed + "_again" is a second, identical fixed-delay model: the ratio between the two is what noise alone gives.
    arms = [fixed, fixed + "_again", m + "_adaptive"] + ([] if a.without_nobatch else [m + "_nobatch"])
    if a.with_cpu_aware:
        cpu_aware = m + "_adaptive_cpu_aware"
        shutil.copytree(os.path.join(repo, m + "_adaptive"), os.path.join(repo, cpu_aware))
        with open(os.path.join(repo, cpu_aware, "config.pbtxt"), "a") as f:
            f.write('parameters { key: "batching.cpu_aware" value: { string_value: "true" } }\n')
        arms.append(cpu_aware)
    s = rb.Suite(a, work)
    p, port = s.inferd_server(repo, "low-rate")
    try:
        if a.load:
            a.rate = "%.1f" % (bb.capacity(s, port, m + "_fixed_0") * a.load)
        first = {n: bb.stats(port, n) for n in arms}
        before = {n: first[n]["inference_stats"] for n in arms}  # the server means leave the capacity run out
        before_counts = {n: (first[n]["inference_count"], first[n]["execution_count"]) for n in arms}
        cpu_before = cpu_ticks()
        round_s = 5 if m == "tiny_mlp" else bb.DURATION_S[m]  # tiny_mlp: shorter than the bench's, more rounds
        runs = bb.rotated_rounds(s, port, arms, a.rounds, bb.poisson_args(a.rate, round_s), "rate " + a.rate)
        cpu_after = cpu_ticks()
        after = {n: bb.stats(port, n) for n in arms}
    finally:
        p.stop()
    for rows in runs.values():
        for r in rows:
            r["stalled_share"] = r["host_stalls"]["stalled_s"] / r["duration_s"]
    print("rate %s req/s, %d rounds" % (a.rate, a.rounds))
    for n, rows in runs.items():
        p50, p99 = [r["p50_us"] for r in rows], [r["p99_us"] for r in rows]
        # The outside-stall p99 is None where a run had fewer than bb.MIN_OUTSIDE requests outside stalls.
        out = [r["p99_outside_us"] for r in rows if r["p99_outside_us"] is not None]
        print("%-22s p50 median %4.0f us [%s]  p99 median %4.0f us [%s], outside stalls %s [%s]" % (
            n, np.median(p50), " ".join("%.0f" % x for x in p50), np.median(p99), " ".join("%.0f" % x for x in p99),
            "%4.0f us" % np.median(out) if out else "-", " ".join("%.0f" % x for x in out)))
    shares = [r["stalled_share"] for rows in runs.values() for r in rows]
    print("host stalls: %.1f%% of the measured time (median run; %.1f-%.1f%%), %d stalls in all" % (
        100 * np.median(shares), 100 * min(shares), 100 * max(shares),
        sum(r["host_stalls"]["count"] for rows in runs.values() for r in rows)))
    delay = "delay %d" % a.best
    print("per round:")
    if not a.without_nobatch:
        print("  %-33s %s" % ("p50 adaptive / no batching:", paired(runs, arms[2], arms[3], "p50_us")))
    if a.with_cpu_aware:
        for key in ("p50_us", "p99_us"):
            print("  %-33s %s" % ("%s cpu-aware / adaptive:" % key[:3], paired(runs, arms[-1], arms[2], key)))
    print("  %-33s %s" % ("p99 adaptive / %s:" % delay, paired(runs, arms[2], arms[0], "p99_us")))
    print("  %-33s %s" % ("p99 %s (again) / %s:" % (delay, delay), paired(runs, arms[1], arms[0], "p99_us")))
    print("  outside stalls:")
    if a.with_cpu_aware:
        print("  %-33s %s" % ("p99 cpu-aware / adaptive:", paired(runs, arms[-1], arms[2], "p99_outside_us")))
    print("  %-33s %s" % ("p99 adaptive / %s:" % delay, paired(runs, arms[2], arms[0], "p99_outside_us")))
    print("  %-33s %s" % ("p99 %s (again) / %s:" % (delay, delay), paired(runs, arms[1], arms[0], "p99_outside_us")))
    print("  %-33s %s" % ("p50 %s (again) / %s:" % (delay, delay), paired(runs, arms[1], arms[0], "p50_us")))
    print("server-side mean per request (us):")
    for n in arms:
        st, b = after[n]["inference_stats"], before[n]
        d = {k: (st[k]["count"] - b[k]["count"], st[k]["ns"] - b[k]["ns"]) for k in st}
        count = max(1, d["success"][0])
        print("  %-22s total %6.1f  queue %5.1f  input %4.1f  infer %5.1f  output %4.1f  (%d requests)" % (
            n, d["success"][1] / count / 1e3, d["queue"][1] / count / 1e3, d["compute_input"][1] / count / 1e3,
            d["compute_infer"][1] / count / 1e3, d["compute_output"][1] / count / 1e3, count))
    print("rows per batch:", ", ".join("%s %.1f" % (n, (after[n]["inference_count"] - before_counts[n][0]) /
                                                   max(1, after[n]["execution_count"] - before_counts[n][1]))
                                        for n in arms))
    for n in arms:
        if "batching" in after[n]:
            b = after[n]["batching"]
            print("%s: waits %d, planned wait %.0f us in all, cpu_utilization (last decision) %.2f" % (
                n, b["waits"], b["wait_us_total"], b.get("cpu_utilization", 0)))
    print("machine CPU busy over the rounds: %.2f" % ((cpu_after[0] - cpu_before[0]) /
                                                       max(1, cpu_after[1] - cpu_before[1])))


if __name__ == "__main__":
    main()
