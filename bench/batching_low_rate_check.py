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
    got = {n: [] for n in arms}
    try:
        for rep in range(a.rounds):
            k = rep % len(arms)
            for n in arms[k:] + arms[:k]:
                r = s.bench("%s #%d" % (n, rep + 1), port, n, ["--request-rate", a.rate, "--duration-s", "5",
                                                               "--protocol", "v2-binary", "--max-connections", "64"])[0]
                got[n].append((r["p50_us"], r["p99_us"]))
        waits = bb.stats(port, "tiny_mlp_adaptive")["batching"]["waits"]
    finally:
        p.stop()
    for n, v in got.items():
        v = np.array(v)
        print("%-18s p50 median %4.0f us [%s]  p99 median %4.0f us" % (
            n, np.median(v[:, 0]), " ".join("%.0f" % x for x in v[:, 0]), np.median(v[:, 1])))
    print("adaptive waits: %d" % waits)


if __name__ == "__main__":
    main()
