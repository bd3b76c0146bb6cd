#!/usr/bin/python3
"""A longer look at the low rate of `make bench-batching`: tiny_mlp at ~4,900 req/s (10% of its capacity on a
2-core VM) served with delay 0, adaptive batching and no batching, 10 rounds of 5 s each, order rotated; prints
each setting's median p50 and p99. The batching bench's low-rate p50 comparison rests on 5 rounds of a few
microseconds' difference; this repeats it with more rounds.

Usage: batching_low_rate_check.py --inferd build/src/inferd [--rate 4900] [--rounds 10]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import batching_bench as bb  # noqa: E402
import run_bench as rb  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--rate", default="4900")
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    a.quick = False
    work, repo = bb.variant_repository("inferd-low-rate-check-")
    s = rb.Suite(a, work)
    p, port = s.inferd_server(repo, "low-rate")
    arms = ["tiny_mlp_fixed_0", "tiny_mlp_adaptive", "tiny_mlp_nobatch"]
    try:
        runs = bb.rotated_rounds(s, port, arms, a.rounds, ["--request-rate", a.rate, "--duration-s", "5", "--protocol",
                                                         "v2-binary", "--max-connections", "64"], "low rate")
        waits = bb.stats(port, "tiny_mlp_adaptive")["batching"]["waits"]
    finally:
        p.stop()
    for n, rows in runs.items():
        p50 = [r["p50_us"] for r in rows]
        print("%-18s p50 median %4.0f us [%s]  p99 median %4.0f us" % (
            n, np.median(p50), " ".join("%.0f" % x for x in p50), np.median([r["p99_us"] for r in rows])))
    print("adaptive waits: %d" % waits)


if __name__ == "__main__":
    main()
