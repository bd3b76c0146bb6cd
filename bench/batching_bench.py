#!/usr/bin/python3
"""Batching benchmark (`make bench-batching`, issue 18's targets), ratios measured in one run:

  adaptive vs fixed delay: the example CNN (resnet18) and tiny_mlp under Poisson arrivals at a low, a medium and
  a high rate (fractions of the model's closed-loop capacity, measured first). Fixed-delay settings are swept
  (max_queue_delay_microseconds); the best is the one with the lowest mean p99 at that rate. The comparison
  is then measured afresh, not read off the sweep: best fixed, delay 0, adaptive (and no batching at the low
  rate) in several rounds, order rotated, medians compared. Target: adaptive throughput >= 1.0x the best at
  equal or better p99 at every rate, and p50 at the low rate no worse than without batching. A second model
  identical to the best ("again") runs in the same rounds: the per-round ratio between the two is what noise
  alone gives. Every run has the host stall probe on (`inferd bench --host-stall-probe`): where a run has enough
  requests sent outside the host's CPU stalls (MIN_OUTSIDE), the sweep ranks by their p99 and the report
  compares it too, beside the p99 over all requests;
  sequence bucketing vs equal-shape-only batching: a GRU text classifier (2 layers, hidden 64) with token
  lengths uniform in 8-128, Poisson arrivals at a sweep of rates. Throughput at equal p99 (the p99 the
  equal-shape server shows at the highest rate it sustains): target >= 2x. Padding waste reported.

Every server is inferd; the load generator is `inferd bench` (v2 binary). Writes
bench/results/<date>-<host>-batching.{json,md}.

Usage: batching_bench.py --inferd build/src/inferd [--quick]
"""
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
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402


torch.set_num_threads(1)

SWEEP = {"tiny_mlp": [0, 500, 2000, 8000], "resnet18": [0, 2000, 10000, 30000]}
# Per run: resnet18 answers ~7 req/s at the low rate, so its runs are longer to give p99 a few hundred samples.
DURATION_S = {"tiny_mlp": 8, "resnet18": 20}
SELECT_REPS = {"tiny_mlp": 2, "resnet18": 1}
EVAL_REPS = {"tiny_mlp": 5, "resnet18": 3}
# A p99 of the requests sent outside host stalls is compared only where every run has at least this many (below
# it the p99 is one of the few slowest requests; resnet18's runs have a few hundred requests in all).
MIN_OUTSIDE = 1000
EXTRA = {"tiny_mlp": "", "resnet18": "preferred_batch_size: [ 2 ]\n  default_queue_policy { max_queue_size: 256 }\n"}


def variants(src_repo, repo):
    """resnet18 / tiny_mlp as in the examples, with the batching block replaced: nobatch, fixed_<us>, adaptive; and
    fixed_<us>_again, identical to fixed_<us> (the noise control)."""
    names = []
    for model, delays in SWEEP.items():
        base = open(os.path.join(src_repo, model, "config.pbtxt")).read()
        base = re.sub(r"dynamic_batching\s*\{[^{}]*(\{[^{}]*\}[^{}]*)*\}", "", base)
        base = re.sub(r'name: "[^"]*"\n', "", base)
        blocks = {"%s_nobatch" % model: ""}
        for d in delays:
            block = "dynamic_batching {\n  %smax_queue_delay_microseconds: %d\n}\n" % (EXTRA[model], d)
            blocks["%s_fixed_%d" % (model, d)] = block
            blocks["%s_fixed_%d_again" % (model, d)] = block
        blocks["%s_adaptive" % model] = (
            "dynamic_batching {\n  %smax_queue_delay_microseconds: %d\n}\n"
            'parameters { key: "batching.mode" value: { string_value: "adaptive" } }\n' % (EXTRA[model], max(delays)))
        for name, block in blocks.items():
            shutil.copytree(os.path.join(src_repo, model, "1"), os.path.join(repo, name, "1"))
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write(base + block)
            names.append(name)
    return names


class GruClassifier(nn.Module):
    """A text classifier: embedding, 2-layer GRU (hidden 64), head on the state at each sequence's last real
    token (found from the mask), so padding at the end never changes an answer. Its cost is one GRU step per
    position, mostly per-call overhead: the kind of model that gains from batching. (Transformer encoders
    measured here gained nothing: see docs/batching.md.)"""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(1000, 64)
        self.rnn = nn.GRU(64, 64, num_layers=2, batch_first=True)
        self.head = nn.Linear(64, 2)

    def forward(self, tokens, mask):
        out, _ = self.rnn(self.embed(tokens))
        last = mask.sum(1) - 1
        return self.head(out[torch.arange(out.shape[0]), last])


def text_models(repo):
    torch.manual_seed(0)
    m = torch.jit.script(GruClassifier().eval())
    common = """platform: "pytorch_libtorch"
max_batch_size: 16
input [ { name: "tokens" data_type: TYPE_INT64 dims: [ -1 ] }, { name: "mask" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 2 ] } ]
dynamic_batching { max_queue_delay_microseconds: 2000 default_queue_policy { max_queue_size: 512 } }
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
"""
    padded = common + """parameters { key: "batching.pad_inputs" value: { string_value: "tokens:0" } }
parameters { key: "batching.mask_input" value: { string_value: "mask" } }
parameters { key: "batching.buckets" value: { string_value: "16,24,32,48,64,96,128" } }
"""
    for name, cfg in (("text_equal_shape", common), ("text_bucketed", padded)):
        os.makedirs(os.path.join(repo, name, "1"))
        m.save(os.path.join(repo, name, "1", "model.pt"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(cfg)


def in_process_padding(quick):
    """Per-request time of 256 requests of lengths 8-128 run one by one vs in batches of up to 16 padded to
    buckets (16, 24, 32, 48, 64, 96, 128), in this process with one thread: how much a model gains from
    bucketing before any server is involved."""
    sys.path.insert(0, os.path.join(rb.ROOT, "tests", "integration"))
    import bucketing_fixtures as B  # noqa: E402
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(8, 129, size=64 if quick else 256)]
    buckets = (16, 24, 32, 48, 64, 96, 128)
    torch.manual_seed(0)
    models = [("GRU classifier, 2 layers, hidden 64 (the bench model)", GruClassifier()),
              ("transformer encoder, 2 layers, hidden 64", B.ClsEncoder(vocab=1000, hidden=64, ff=256, layers=2)),
              ("transformer encoder, 4 layers, hidden 256", B.ClsEncoder(vocab=1000, hidden=256, ff=1024, layers=4))]
    out = []
    for name, module in models:
        m = torch.jit.freeze(torch.jit.script(module.eval()))

        def alone():
            for n in lengths:
                t = torch.randint(1, 999, (1, n))
                m(t, torch.ones_like(t))

        def bucketed():
            groups = {}
            for n in lengths:
                groups.setdefault(next(b for b in buckets if b >= n), []).append(n)
            for b, ns in groups.items():
                for i in range(0, len(ns), 16):
                    chunk = ns[i:i + 16]
                    t = torch.zeros(len(chunk), b, dtype=torch.long)
                    mask = torch.zeros_like(t)
                    for j, n in enumerate(chunk):
                        t[j, :n] = 5
                        mask[j, :n] = 1
                    m(t, mask)

        with torch.no_grad():
            times = {}
            for f in (alone, bucketed, alone, bucketed):
                t0 = time.perf_counter()
                f()
                times.setdefault(f.__name__, []).append((time.perf_counter() - t0) / len(lengths))
        out.append((name, min(times["alone"]), min(times["bucketed"])))
    return out


def stats(port, model):
    with urllib.request.urlopen("http://127.0.0.1:%d/v2/models/%s/stats" % (port, model)) as r:
        return json.load(r)["model_stats"][0]


def capacity(suite, port, model):
    """`model`'s closed-loop capacity (requests/s at 16 in flight): the rates of part 1 are fractions of it."""
    return suite.bench("capacity", port, model, ["--concurrency", "16", "--protocol", "v2-binary"])[0]["requests_per_s"]


def poisson_args(rate, duration_s):
    """`inferd bench` arguments for Poisson arrivals at `rate` requests/s (a string) for `duration_s` seconds, with
    the host stall probe on."""
    return ["--request-rate", rate, "--duration-s", "%g" % duration_s, "--protocol", "v2-binary",
            "--max-connections", "64", "--host-stall-probe"]


def outside_p99(row):
    """The p99 (us) of the requests a run sent outside host stalls (and their guard), or None where there were
    fewer than MIN_OUTSIDE of them."""
    h = row.get("host_stalls")
    return h["outside"]["p99_us"] if h and h["outside"]["requests"] >= MIN_OUTSIDE else None


def tail_key(rows):
    """The report key to rank and compare `rows` by: "p99_outside_us" where every row has an outside-stall p99
    (`outside_p99`, stored under that key), else "p99_us"."""
    return "p99_outside_us" if all(r.get("p99_outside_us") is not None for r in rows) else "p99_us"


def paired(runs, a, b, key):
    """The per-round ratios of a's `key` to b's (the same round, so the same machine weather): {"median", "lo",
    "hi" (a 90% bootstrap interval of the median), "lower" (rounds in which a was lower), "rounds"}; None where a
    round lacks the key."""
    pairs = [(x.get(key), y.get(key)) for x, y in zip(runs[a], runs[b])]
    if not pairs or any(x is None or not y for x, y in pairs):
        return None
    ratio = np.array([x / y for x, y in pairs])
    rng = np.random.default_rng(1)
    boot = [np.median(rng.choice(ratio, len(ratio))) for _ in range(2000)]
    return {"median": float(np.median(ratio)), "lo": float(np.percentile(boot, 5)),
            "hi": float(np.percentile(boot, 95)), "lower": int((ratio < 1).sum()), "rounds": len(ratio)}


def paired_text(p, short=False):
    """`paired`'s result in words."""
    if p is None:
        return "-"
    if short:
        return "%.3fx (%.2f-%.2fx), lower %d of %d" % (p["median"], p["lo"], p["hi"], p["lower"], p["rounds"])
    return "median %.3fx, 90%% bootstrap interval %.3f-%.3fx, lower in %d of %d rounds" % (
        p["median"], p["lo"], p["hi"], p["lower"], p["rounds"])


def rotated_rounds(suite, port, names, rounds, args, tag):
    """Runs `inferd bench` on each model in `names` once per round, starting each round one model later (so no
    setting always runs first or last); returns {name: [report row per round]}.
    Each row gets "p99_outside_us" (`outside_p99`)."""
    runs = {n: [] for n in names}
    for rep in range(rounds):
        k = rep % len(names)
        for n in names[k:] + names[:k]:
            row = suite.bench("%s %s #%d" % (n, tag, rep + 1), port, n, args)[0]
            row["p99_outside_us"] = outside_p99(row)
            runs[n].append(row)
    return runs


def variant_repository(prefix):
    """A temporary folder holding the example models and a repository of their batching variants."""
    work = tempfile.mkdtemp(prefix=prefix)
    examples = os.path.join(work, "examples")
    subprocess.run([rb.PY, os.path.join(rb.ROOT, "scripts", "make_examples.py"), examples, "--skip-chat"], check=True,
                   stdout=subprocess.DEVNULL)
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    variants(examples, repo)
    return work, repo


def main():
    a = rb.bench_args()
    work, repo = variant_repository("inferd-batching-bench-")
    text_models(repo)
    s = rb.Suite(a, work)
    dur = "4" if a.quick else "8"
    p, port = s.inferd_server(repo, "batching")
    results = {"adaptive": {}, "text": {}}
    waits = {}
    try:
        # Part 1: adaptive vs fixed delays. p99 over a few seconds on this VM moves by 2-10x between identical
        # runs (measured: the same server 1.0 ms, then 7.7 ms), and the lowest of four noisy p99s favours the
        # sweep (the winner's curse). So the sweep only selects the best fixed delay (mean p99 of its runs,
        # outside host stalls where there are enough requests); the comparison is then measured afresh: best
        # fixed, a copy of it (the noise), delay 0, adaptive (and no batching at the low rate) in EVAL_REPS
        # rounds, order rotated each round, medians and per-round ratios compared.
        for model, delays in SWEEP.items():
            cap = capacity(s, port, model + "_fixed_0")
            d = DURATION_S[model] / (2 if a.quick else 1)
            for level, frac in (("low", 0.1), ("medium", 0.4), ("high", 0.7)):
                rate = "%.1f" % (cap * frac)
                args = poisson_args(rate, d)
                fixed = ["%s_fixed_%d" % (model, x) for x in delays]
                sweep = {}
                for rep in range(SELECT_REPS[model]):
                    for n in (fixed if rep % 2 == 0 else list(reversed(fixed))):
                        r = s.bench("%s %s sweep #%d" % (n, level, rep + 1), port, n, args)[0]
                        r["p99_outside_us"] = outside_p99(r)
                        sweep.setdefault(n, []).append(r)
                rank = tail_key([r for rs in sweep.values() for r in rs])
                sweep = {n: [r[rank] for r in rs] for n, rs in sweep.items()}
                best = min(fixed, key=lambda n: np.mean(sweep[n]))
                arms = [best, best + "_again"] + (["%s_fixed_0" % model] if best != "%s_fixed_0" % model else [])
                arms += ["%s_adaptive" % model] + (["%s_nobatch" % model] if level == "low" else [])
                before = {n: stats(port, n) for n in arms}
                runs = rotated_rounds(s, port, arms, 2 if a.quick else EVAL_REPS[model], args, level + " eval")
                after = {n: stats(port, n) for n in arms}
                ad = "%s_adaptive" % model
                waits[(model, level)] = after[ad]["batching"]["waits"] - before[ad]["batching"]["waits"]
                # Rows per execution in the rounds, and the adaptive batcher's fit at their end.
                batch = {n: (after[n]["inference_count"] - before[n]["inference_count"]) /
                         max(1, after[n]["execution_count"] - before[n]["execution_count"]) for n in arms}
                fit = (after[ad]["batching"]["cost_fixed_us"], after[ad]["batching"]["cost_per_row_us"])
                results["adaptive"][(model, level)] = (float(rate), best, (rank, sweep), runs, batch, fit)
        # Part 2: variable-length text.
        load = ["--sequence-lengths", "8-128", "--int-range", "1:1000", "--constant-input", "mask=1",
                "--request-count", "128", "--protocol", "v2-binary", "--max-connections", "128"]
        cap = s.bench("capacity", port, "text_bucketed", ["--concurrency", "32"] + load)[0]["requests_per_s"]
        fracs = [0.1, 0.2, 0.3, 0.45, 0.6, 0.75, 0.9]
        before = stats(port, "text_bucketed")["batching"]
        for model in ("text_equal_shape", "text_bucketed"):
            pts = []
            for f in fracs:
                r = s.bench("%s %.2f" % (model, f), port, model,
                            ["--request-rate", "%.1f" % (cap * f), "--duration-s", dur] + load)[0]
                pts.append((cap * f, r))
            results["text"][model] = pts
        after = stats(port, "text_bucketed")["batching"]
    finally:
        p.stop()
    padding_in_process = in_process_padding(a.quick)

    lines = ["# Batching benchmark %s (%s, %d CPUs)" % (datetime.date.today().isoformat(),
                                                          platform.node().split(".")[0] or "host", os.cpu_count()),
             "", "## Adaptive batching vs the best fixed delay (Poisson arrivals)", "",
             "The sweep picks the fixed delay with the lowest mean p99 (of the requests sent outside host stalls",
             "where every run has at least %d; else of all requests); then best fixed, a copy of it, delay 0," % (
                 MIN_OUTSIDE),
             "adaptive (and no batching at the low rate) run again in rounds (order rotated), and the medians of",
             "those rounds are compared (p99 over all requests). 'adaptive p99 <= best' counts the rounds in which",
             "adaptive's p99 was at most the best's.", "",
             "| model | rate | offered req/s | best fixed delay (sweep p99 us) | adaptive / best throughput "
             "| p99 adaptive vs best (median) | adaptive p99 <= best | p99 adaptive vs delay 0 (median) "
             "| p50 adaptive vs no batching | adaptive waits | rows per batch, adaptive vs best | adaptive's fit "
             "(fixed + per row) | wanted |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    summary = {"adaptive": [], "text": {}}

    def med(rs, key):
        return float(np.median([r[key] for r in rs]))

    noise = ["", "### Paired per round, with the noise control", "",
             "Per-round ratios (the same round, so the same machine weather): median, 90% bootstrap interval of the",
             "median, rounds in which the first was lower. 'best again' is a second model identical to the best",
             "fixed delay, in the same rounds: its ratio is what noise alone gives. 'Outside stalls' is the p99 of",
             "the requests sent outside the host's CPU stalls and %s ms after them (`inferd bench "
             "--host-stall-probe`)," % "200",
             "compared where every run has at least %d such requests." % MIN_OUTSIDE, "",
             "| model | rate | host stalled (median run) | p99 adaptive / best | p99 best again / best "
             "| p99 outside stalls, adaptive / best | p99 outside stalls, best again / best |",
             "|---|---|---|---|---|---|---|"]
    for (model, level), (rate, best, (rank, sweep), runs, batch, fit) in results["adaptive"].items():
        ad_name = "%s_adaptive" % model
        ad, bs = runs[ad_name], runs[best]
        tput = med(ad, "requests_per_s") / med(bs, "requests_per_s")
        p99 = med(ad, "p99_us") / med(bs, "p99_us")
        vs_zero = med(ad, "p99_us") / med(runs["%s_fixed_0" % model], "p99_us")
        wins = sum(x["p99_us"] <= y["p99_us"] for x, y in zip(ad, bs))
        p50_note, p50 = "-", None
        if level == "low":
            nb = runs["%s_nobatch" % model]
            p50 = med(ad, "p50_us") / med(nb, "p50_us")
            p50_note = "%.0f vs %.0f us (%.2fx)" % (med(ad, "p50_us"), med(nb, "p50_us"), p50)
        again = best + "_again"
        pairs = {(k, arm): paired(runs, arm, best, k) for k in ("p99_us", "p99_outside_us")
                 for arm in (ad_name, again)}
        stalled = float(np.median([r["host_stalls"]["stalled_s"] / r["duration_s"]
                                   for rs in runs.values() for r in rs]))
        noise.append("| %s | %s | %.1f%% | %s | %s | %s | %s |" % (
            model, level, 100 * stalled, *(paired_text(pairs[k], short=True) for k in
                                          [("p99_us", ad_name), ("p99_us", again), ("p99_outside_us", ad_name),
                                           ("p99_outside_us", again)])))
        lines.append("| %s | %s | %.0f | %s us (%s) | %.3fx | %.0f vs %.0f us (%.2fx) | %d of %d | %.2fx | %s | %d "
                     "| %.2f vs %.2f | %.0f + %.1f us | >= 1.0x at p99 <= 1.0x%s |" % (
                         model, level, rate, best.rsplit("_", 1)[1],
                         ", ".join("%s: %.0f" % (n.rsplit("_", 1)[1], np.mean(v)) for n, v in sweep.items()), tput,
                         med(ad, "p99_us"), med(bs, "p99_us"), p99, wins, len(ad),
                         vs_zero, p50_note, waits[(model, level)], batch[ad_name], batch[best], fit[0], fit[1],
                         "; p50 <= no batching" if level == "low" else ""))
        summary["adaptive"].append({"model": model, "level": level, "rate": rate, "best_fixed": best,
                                    "sweep_p99_us": sweep, "sweep_ranked_by": rank,
                                    "paired": {"p99_adaptive": pairs[("p99_us", ad_name)],
                                               "p99_best_again": pairs[("p99_us", again)],
                                               "p99_outside_adaptive": pairs[("p99_outside_us", ad_name)],
                                               "p99_outside_best_again": pairs[("p99_outside_us", again)]},
                                    "host_stalled_share": stalled,
                                    "throughput_ratio": tput, "p99_ratio": p99, "p99_rounds_won": wins,
                                    "rounds": len(ad), "p50_vs_nobatch": p50,
                                    "p99_vs_delay0": vs_zero,
                                    "adaptive_waits": waits[(model, level)], "rows_per_batch": batch,
                                    "adaptive_fit_us": {"fixed": fit[0], "per_row": fit[1]}})
    lines += noise
    eq, bk = results["text"]["text_equal_shape"], results["text"]["text_bucketed"]
    sustained = [r for rate, r in eq if r["requests_per_s"] >= 0.95 * rate and r.get("errors", 0) == 0]
    slo = (sustained[-1] if sustained else eq[0][1])["p99_us"]

    def best_at(points):
        ok = [r["requests_per_s"] for rate, r in points if r["p99_us"] <= slo]
        return max(ok) if ok else 0.0

    t_eq, t_bk = best_at(eq), best_at(bk)
    padded = after["padded_elements"] - before["padded_elements"]
    real = after["real_elements"] - before["real_elements"]
    waste = 1 - real / padded if padded else 0
    lines += ["", "## Sequence bucketing vs equal-shape-only batching (lengths 8-128)", "",
              "p99 bound: %.0f us (the equal-shape server's p99 at the highest rate it sustains)." % slo, "",
              "| target | measured | wanted |", "|---|---|---|",
              "| throughput at equal p99, bucketed / equal-shape | %.0f / %.0f req/s = %.2fx | >= 2x |" % (
                  t_bk, t_eq, t_bk / t_eq if t_eq else 0),
              "| padding waste (padded positions that were padding) | %.1f%% | (reported) |" % (100 * waste), "",
              "| server | offered req/s | req/s | p50 us | p99 us |", "|---|---|---|---|---|"]
    for name, pts in results["text"].items():
        lines += ["| %s | %.0f | %.0f | %.0f | %.0f |" % (name, rate, r["requests_per_s"], r["p50_us"], r["p99_us"])
                  for rate, r in pts]
    lines += ["", "## In process: what bucketing saves a model by itself (one thread, 8-128 tokens)", "",
              "| model | alone ms/request | bucketed ms/request | alone / bucketed |", "|---|---|---|---|"]
    lines += ["| %s | %.2f | %.2f | %.2fx |" % (n, a_ * 1e3, b_ * 1e3, a_ / b_) for n, a_, b_ in padding_in_process]
    lines += ["", "## All runs", "", "| label | req/s | p50 us | p99 us |", "|---|---|---|---|"]
    lines += ["| %s | %.0f | %.0f | %.0f |" % (r["label"], r["requests_per_s"], r["p50_us"], r["p99_us"])
              for r in s.rows]
    summary["in_process"] = [{"model": n, "alone_s": a_, "bucketed_s": b_} for n, a_, b_ in padding_in_process]
    summary["text"] = {"p99_bound_us": slo, "equal_shape_rps": t_eq, "bucketed_rps": t_bk,
                       "ratio": t_bk / t_eq if t_eq else 0, "padding_waste": waste}
    rb.write_results(a.out_dir, "batching", lines, {"summary": summary, "rows": s.rows})


if __name__ == "__main__":
    main()
