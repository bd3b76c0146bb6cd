#!/usr/bin/python3
"""Generative serving benchmark (`make bench-generative`, issue 17's targets), ratios measured in one run, on
`bench_llama`: a Llama-architecture decoder (8 layers, hidden 512, grouped-query attention, ~25M parameters,
random weights, FP32) with a SentencePiece tokenizer, served by inferd with 2 intra-op threads:

  A. continuous (iteration-level) vs static batching (`scheduling: static`, the same scheduler forming a batch only
     when none runs): Poisson arrivals at several rates, prompts 48+-32 words, outputs 96+-80 tokens (exact:
     ignore_eos). At equal p99 TTFT: the TTFT bound is the lowest p99 TTFT static batching reaches at any rate (plus
     10%); for each mode the highest output tokens/s among the rates whose p99 TTFT stays within it; target
     continuous / static >= 3x;
  B. multi-turn chat with prefix caching on vs off: 8 conversations of 4 turns over a shared 300-word system prompt,
     each turn resending the history; TTFT of the later turns, target >= 3x lower with caching;
  C. decode tokens/s at concurrency 16 vs a Python generate loop with a KV cache over the same weights in
     python3-torch (bench/baselines/torch_generate.py: the 16 sequences decoded as one batch, 2 threads);
     target >= 2x;
  D. against llama.cpp on the same weights (bench/llama_cpp_compare.py; issue 39): greedy outputs compared first,
     decode tokens/s at 1 and 16 sequences against llama.cpp at the same threads and at its best count, TTFT of a
     512-token prompt; targets >= 1.3x, >= 2.5x, TTFT <= llama.cpp's; then `quantization: int8` against
     llama.cpp's Q8_0 of the same weights (target >= 1.2x at 1 and 16 sequences) and int8's greedy tokens against
     FP32's, teacher-forced (target >= 95% equal);
  E. structured outputs (bench/structured_outputs_bench.py; issue 39): 200 answers under JSON schemas from 16
     clients, every one validated with jsonschema, and the time spent on token masks against decode time; targets
     100% valid, masks <= 10% of decode time;
  F. prompt-lookup speculative decoding (bench/speculative_bench.py; issue 39): decode tokens/s with and without it
     on summarise-this-text prompts at 1 sequence (a copying model built by hand at bench_llama's size:
     bench/copy_model.py), at 16 sequences, on random weights (drafts rarely right) and on license_chat when it
     exists; targets >= 1.5x at 1 sequence, no slower where drafts do not pay;
  G. LoRA adapters (bench/lora_bench.py; issue 40): 1,000 rank-8 adapters under a 10% host-memory budget with Zipf
     traffic (all served, cold load p50 <= 10 ms), decode tokens/s with 8 adapters in every batch against the base
     model alone (>= 0.85x).

Writes bench/results/<date>-<host>-generative.{json,md}. Usage: generative_bench.py --inferd build/src/inferd [--quick]
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

import sentencepiece as spm
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_cpp_compare  # noqa: E402
import run_bench as rb  # noqa: E402
import structured_outputs_bench  # noqa: E402

sys.path.insert(0, os.path.join(rb.ROOT, "src", "backends", "llm", "testdata"))
import reference  # noqa: E402

CONFIG = {"model_type": "llama", "vocab_size": 1024, "hidden_size": 512, "num_hidden_layers": 8,
          "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 1408,
          "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
          "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}


def make_model(repo):
    d = os.path.join(repo, "bench_llama", "1")
    os.makedirs(d)
    corpus = os.path.join(d, "corpus.txt")
    shutil.copy("/usr/share/common-licenses/GPL-3", corpus)
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(d, "tokenizer"), vocab_size=1024,
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0, bos_id=1, eos_id=2,
                                   unk_id=0, pad_id=-1, user_defined_symbols=["<|im_start|>", "<|im_end|>"],
                                   minloglevel=2, num_threads=1)
    os.remove(corpus)
    g = torch.Generator().manual_seed(0)
    weights = {n: (1.0 + 0.1 * torch.randn(s, generator=g)) if n.endswith("norm.weight") else 0.02 * torch.randn(s, generator=g)
               for n, s in reference.llama_shapes(CONFIG, False).items()}
    reference.write_safetensors(os.path.join(d, "model.safetensors"), weights, "F32")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True}, f)
    for name, extra in [("bench_llama", {}), ("bench_llama_static", {"scheduling": "static"}),
                        ("bench_llama_noprefix", {"enable_prefix_caching": "false"}),
                        ("bench_llama_int8", {"quantization": "int8"})]:
        if name != "bench_llama":
            shutil.copytree(d, os.path.join(repo, name, "1"))
        params = dict({"chat_template": "chatml", "INTRA_OP_THREAD_COUNT": "2", "kv_cache_bytes": str(512 << 20),
                       "max_num_seqs": "64", "max_num_batched_tokens": "512"}, **extra)
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write('name: "%s"\nbackend: "llm"\n' % name)
            for k, v in sorted(params.items()):
                f.write('parameters { key: "%s" value: { string_value: "%s" } }\n' % (k, v))
    return d


def bench(a, port, work, label, model, *args):
    out = os.path.join(work, label.replace(" ", "_") + ".json")
    cmd = [a.inferd, "bench", "--generative", "-m", model, "--url", "http://127.0.0.1:%d" % port, "--label", label,
           "--output", out, *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout, end="", flush=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s %s" % (label, r.stdout, r.stderr))
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="inferd-genbench-")
    repo = os.path.join(work, "repo")
    model_dir = make_model(repo)
    port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
    p = rb.Proc([a.inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port", str(mport),
                 "--grpc-port", str(gport), "--host", "127.0.0.1", "--log-level", "warn"],
                port, "/v2/health/ready", os.path.join(work, "inferd.log"))
    rep = {"date": datetime.date.today().isoformat(), "host": platform.node(), "cpu": rb.cpu_model(),
           "cores": os.cpu_count(), "model": CONFIG}
    try:
        n = 16 if a.quick else 32
        rates = [0.5, 2, 8] if a.quick else [0.5, 1, 2, 4, 8]
        lengths = ["--prompt-words", "48:32", "--output-tokens", "96:80", "--endpoint", "completions",
                   "--concurrency", "64", "--num-prompts", str(n)]
        # Warm-up (first loads, allocator).
        bench(a, port, work, "warmup", "bench_llama", "--num-prompts", "4", "--output-tokens", "8")
        sweep = {}
        for mode, model in [("continuous", "bench_llama"), ("static", "bench_llama_static")]:
            # A seed per rate: no run finds the previous run's prompts in the prefix cache.
            sweep[mode] = [bench(a, port, work, "%s rate %g" % (mode, r), model, "--request-rate", str(r),
                                 "--seed", str(100 + i), *lengths) for i, r in enumerate(rates)]
        rep["sweep"] = sweep

        slo = 1.1 * min(r["ttft_ms"]["p99"] for r in sweep["static"])

        def best(rows):
            ok = [r for r in rows if r["ttft_ms"]["p99"] <= slo]
            return max(ok, key=lambda r: r["output_tokens_per_s"]) if ok else None

        bc, bs = best(sweep["continuous"]), best(sweep["static"])
        rep["slo_ttft_ms"] = slo
        rep["continuous_vs_static"] = {
            "continuous_best": bc and bc["output_tokens_per_s"], "static_best": bs and bs["output_tokens_per_s"],
            "ratio": (bc["output_tokens_per_s"] / bs["output_tokens_per_s"]) if bc and bs else None,
            "same_rate": [{"rate": r, "continuous_tps": c["output_tokens_per_s"], "static_tps": s["output_tokens_per_s"],
                           "continuous_p99_ttft_ms": c["ttft_ms"]["p99"], "static_p99_ttft_ms": s["ttft_ms"]["p99"]}
                          for r, c, s in zip(rates, sweep["continuous"], sweep["static"])]}
        system = " ".join(["You are a careful assistant for questions about free software licenses."] * 30)
        chat = ["--turns", "4", "--num-prompts", "8", "--concurrency", "8", "--request-rate", "1",
                "--prompt-words", "24", "--output-tokens", "32", "--system-prompt", system]
        on = bench(a, port, work, "prefix caching on", "bench_llama", "--seed", "200", *chat)
        off = bench(a, port, work, "prefix caching off", "bench_llama_noprefix", "--seed", "200", *chat)
        rep["prefix_caching"] = {"on": on, "off": off,
                                 "later_ttft_p50_ratio": off["later_ttft_ms"]["p50"] / on["later_ttft_ms"]["p50"],
                                 "later_ttft_mean_ratio": off["later_ttft_ms"]["mean"] / on["later_ttft_ms"]["mean"]}
        decode = bench(a, port, work, "decode c16", "bench_llama", "--endpoint", "completions", "--concurrency", "16",
                       "--num-prompts", "16", "--prompt-words", "64", "--output-tokens", "128", "--seed", "300")
        rep["llama_cpp"] = llama_cpp_compare.compare(port, "bench_llama", model_dir, work, threads=2)
        rep["llama_cpp_int8"] = llama_cpp_compare.compare(port, "bench_llama_int8", model_dir, work, threads=2, q8_0=True)
        rep["llama_cpp_int8"]["agreement"] = llama_cpp_compare.agreement(
            port, "bench_llama", "bench_llama_int8", llama_cpp_compare.prompts(8, 64, 4), 64)
        rep["structured"] = structured_outputs_bench.compare(port, mport, "bench_llama")
    finally:
        p.stop()
    base = json.loads(subprocess.run([rb.PY, os.path.join(rb.ROOT, "bench", "baselines", "torch_generate.py"), model_dir,
                                      "--batch", "16", "--prompt-tokens", "64", "--output-tokens", "128", "--threads", "2"],
                                     capture_output=True, text=True, check=True).stdout)
    chat = os.path.join(rb.ROOT, "examples", "repository", "license_chat", "1")
    if os.path.isdir(chat):  # the trained example model (make examples-all): int8's agreement where it means something
        import int8_agreement
        rep["int8_agreement_license_chat"] = int8_agreement.measure(a.inferd, chat)
    import speculative_bench  # (it imports this module: imported here, not at the top)
    rep["speculative"] = speculative_bench.measure(a.inferd, chat if os.path.isdir(chat) else None)
    import lora_bench
    rep["lora"] = lora_bench.measure(a.inferd)
    rep["decode"] = {"inferd": decode, "torch_loop": base,
                     "ratio_total": decode["output_tokens_per_s"] / base["total_tokens_per_s"]}
    stem = os.path.join(rb.ROOT, "bench", "results", "%s-%s-generative" % (rep["date"], rep["host"]))
    with open(stem + ".json", "w") as f:
        json.dump(rep, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(markdown(rep))
    print(markdown(rep))
    shutil.rmtree(work, ignore_errors=True)


def fmt(x, d=2):
    return "n/a" if x is None else ("%.*f" % (d, x))


def markdown(rep):
    cs, pc, dc = rep["continuous_vs_static"], rep["prefix_caching"], rep["decode"]
    out = ["# Generative serving, %s on %s (%s, %d cores)" % (rep["date"], rep["host"], rep["cpu"], rep["cores"]), "",
           "Model: Llama architecture, 8 layers, hidden 512, 8 heads / 4 KV heads, vocab 1024, random FP32 weights; "
           "inferd with 2 intra-op threads. Produced by `make bench-generative` (bench/generative_bench.py).", "",
           "| target | measured | ratio | target met |", "|---|---|---|---|"]
    r = cs["ratio"]
    out.append("| continuous vs static batching: output tokens/s at equal p99 TTFT (<= %.0f ms), >= 3x | %s vs %s tokens/s | %s | %s |"
               % (rep["slo_ttft_ms"], fmt(cs["continuous_best"], 1), fmt(cs["static_best"], 1), fmt(r),
                  "yes" if r and r >= 3 else "no"))
    r = pc["later_ttft_p50_ratio"]
    out.append("| prefix caching: TTFT of later chat turns, >= 3x lower | p50 %s ms on vs %s ms off | %s | %s |"
               % (fmt(pc["on"]["later_ttft_ms"]["p50"], 1), fmt(pc["off"]["later_ttft_ms"]["p50"], 1), fmt(r),
                  "yes" if r >= 3 else "no"))
    r = dc["ratio_total"]
    out.append("| decode tokens/s at concurrency 16 vs a python3-torch loop with KV cache, >= 2x | %s vs %s tokens/s | %s | %s |"
               % (fmt(dc["inferd"]["output_tokens_per_s"], 1), fmt(dc["torch_loop"]["total_tokens_per_s"], 1), fmt(r),
                  "yes" if r >= 2 else "no"))
    out += ["", "## Continuous vs static at the same request rates", "",
            "| rate (req/s) | continuous tokens/s | static tokens/s | continuous p99 TTFT ms | static p99 TTFT ms |",
            "|---|---|---|---|---|"]
    for row in cs["same_rate"]:
        out.append("| %g | %.1f | %.1f | %.0f | %.0f |" % (row["rate"], row["continuous_tps"], row["static_tps"],
                                                        row["continuous_p99_ttft_ms"], row["static_p99_ttft_ms"]))
    out += ["", "## Every run", "", "| run | requests | output tokens/s | TTFT p50 / p99 ms | later-turn TTFT p50 ms | "
            "TPOT p50 / p99 ms | ITL p99 ms | E2E p99 ms | cached prompt tokens |", "|---|---|---|---|---|---|---|---|---|"]
    runs = rep["sweep"]["continuous"] + rep["sweep"]["static"] + [pc["on"], pc["off"], dc["inferd"]]
    for x in runs:
        out.append("| %s | %d | %.1f | %.0f / %.0f | %s | %.1f / %.1f | %.1f | %.0f | %d |" % (
            x["label"], x["requests"], x["output_tokens_per_s"], x["ttft_ms"]["p50"], x["ttft_ms"]["p99"],
            fmt(x["later_ttft_ms"]["p50"], 0) if x["later_ttft_ms"]["p50"] else "-", x["tpot_ms"]["p50"],
            x["tpot_ms"]["p99"], x["itl_ms"]["p99"], x["e2e_ms"]["p99"], x["cached_tokens"]))
    if rep.get("llama_cpp"):
        out += ["", "## Against llama.cpp (same weights as GGUF F32, same token ids, greedy)", "",
                llama_cpp_compare.markdown(rep["llama_cpp"])]
    if rep.get("llama_cpp_int8"):
        out += ["", "## int8 weights against llama.cpp's Q8_0 (same weights)", "",
                llama_cpp_compare.markdown(rep["llama_cpp_int8"])]
        t = rep.get("int8_agreement_license_chat")
        out += ["", "On the trained example model license_chat (text prompts): %s" % (
            "teacher-forced tokens equal **%.1f%%**, running free the first %.1f of %d tokens equal on average."
            % (100 * t["teacher_forced_equal"], t["free_running_equal_prefix_mean"], t["tokens"] // t["prompts"])
            if t else "not measured (`make examples-all` trains it).")]
    if rep.get("structured"):
        out += ["", "## Structured outputs (JSON schemas, 16 concurrent clients, temperature 1)", "",
                structured_outputs_bench.markdown(rep["structured"])]
    if rep.get("speculative"):
        import speculative_bench
        out += ["", "## Prompt-lookup speculative decoding", "", speculative_bench.markdown(rep["speculative"])]
    if rep.get("lora"):
        import lora_bench
        out += ["", lora_bench.markdown(rep["lora"])]
    b = dc["torch_loop"]
    out += ["", "python3-torch loop (16 sequences as one batch, 64 prompt + 128 output tokens): prefill %.2f s, decode "
            "%.1f tokens/s, %.1f tokens/s overall." % (b["prefill_s"], b["decode_tokens_per_s"], b["total_tokens_per_s"]), ""]
    return "\n".join(out)


if __name__ == "__main__":
    main()
