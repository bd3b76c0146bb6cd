#!/usr/bin/python3
"""inferd against llama.cpp on the same weights (issue 39's table; part D of `make bench-generative`).

The model folder is written as GGUF (bench/gguf.py, F32) and decoded by llama.cpp through node-llama-cpp
(bench/baselines/llama_cpp/), both sides fed the same token ids, greedy:

  - greedy outputs first: 32 tokens from the first prompt, llama.cpp's ids decoded with the model's SentencePiece
    tokenizer against inferd's text (must be equal);
  - decode tokens/s at 1 sequence (64-token prompt, 256 new) and at 16 (64 + 128 each): the tokens generated after
    each sequence's first over the time from the first sequence's first token to the last token;
  - TTFT of a 512-token prompt.

llama.cpp runs with inferd's thread count and with one thread (its best count on a small model may be lower).
inferd is driven over its OpenAI API (streamed /v1/completions with token-id prompts, ignore_eos).

With --int8: inferd serves the model with `quantization: int8` and llama.cpp reads it as Q8_0 (bench/gguf.py), and
int8's greedy tokens are compared with FP32's (inferd both), teacher-forced on the FP32 continuation.

Usage (standalone: serves the model folder itself):
  llama_cpp_compare.py --inferd build/src/inferd --model-dir DIR [--threads 2] [--int8] [--out F.json]
"""
import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf  # noqa: E402
import run_bench as rb  # noqa: E402

BASELINE = os.path.join(HERE, "baselines", "llama_cpp")


def prompts(n, length, seed, vocab=1024, bos=1):
    r = random.Random(seed)
    return [[bos] + [r.randrange(3, vocab) for _ in range(length - 1)] for _ in range(n)]


def stream_completion(port, model, prompt, max_tokens, out):
    """One streamed completion: times of the first and last chunk with text, the text, the token count."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("completion: HTTP %d %s" % (r.status, r.read()[:300]))
    got = rb.read_openai_stream(r)
    c.close()
    out.update(got, start=t0)


def inferd_run(port, model, ps, max_tokens):
    results = [dict() for _ in ps]
    threads = [threading.Thread(target=stream_completion, args=(port, model, p, max_tokens, results[i]))
               for i, p in enumerate(ps)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t1 = max(r["last"] for r in results)
    start = min(r["first"] for r in results)
    decoded = sum(r["tokens"] - 1 for r in results)
    return {"sequences": len(ps), "output_tokens": sum(r["tokens"] for r in results), "wall_s": t1 - t0,
            "ttft_s": max(r["first"] for r in results) - t0, "decode_tokens_per_s": decoded / (t1 - start) if t1 > start else 0.0,
            "texts": [r["text"] for r in results]}


def llama_cpp(gguf_path, spec, work):
    spec_path = os.path.join(work, "llama_cpp_spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    r = subprocess.run(["node", os.path.join(BASELINE, "llama_cpp_bench.mjs"), gguf_path, spec_path],
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError("llama.cpp baseline failed: %s" % r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def generate_ids(port, model, ids, max_tokens):
    """Greedy token ids after `ids` (KServe's generate extension: input_ids in, logprobs' token ids out)."""
    body = json.dumps({"input_ids": ids, "parameters": {"max_tokens": max_tokens, "temperature": 0, "logprobs": 0,
                                                        "ignore_eos": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v2/models/%s/generate" % model, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError("generate: HTTP %d %s" % (r.status, data[:300]))
    return [t["token_id"] for t in json.loads(json.loads(data)["logprobs"])]


def agreement(port, reference_model, model, ps, new_tokens):
    """Teacher-forced greedy agreement of `model` with `reference_model`: the reference's greedy continuation of
    each prompt, then for every position the token `model` picks after the reference's prefix (one-token requests;
    the prefix cache makes them cheap). Also the tokens before the first difference when both run free."""
    same = total = 0
    free = []
    for p in ps:
        ref = generate_ids(port, reference_model, p, new_tokens)
        mine = generate_ids(port, model, p, new_tokens)
        free.append(next((i for i, (a, b) in enumerate(zip(ref, mine)) if a != b), len(ref)))
        for k in range(new_tokens):
            total += 1
            same += generate_ids(port, model, p + ref[:k], 1)[0] == ref[k]
    return {"prompts": len(ps), "tokens": total, "teacher_forced_equal": same / total,
            "free_running_equal_prefix_mean": sum(free) / len(free)}


def compare(port, model, model_dir, work, threads=2, q8_0=False):
    """Runs both sides against a served `model` (on `port`) whose folder is `model_dir`; with `q8_0`, llama.cpp
    reads the weights as Q8_0 (`model` is then served with quantization int8)."""
    gguf_path = os.path.join(work, "model-q8_0.gguf" if q8_0 else "model.gguf")
    gguf.write(model_dir, gguf_path, quantize_q8_0=q8_0)
    one = prompts(1, 64, 1)
    sixteen = prompts(16, 64, 2)
    long = prompts(1, 512, 3)[0]
    runs = [{"label": "1 sequence", "prompts": one, "output_tokens": 256},
            {"label": "16 sequences", "prompts": sixteen, "output_tokens": 128}]
    if threads != 1:
        runs += [dict(r, label=r["label"] + ", 1 thread", threads=1) for r in runs]
    base = llama_cpp(gguf_path, {"threads": threads, "greedy": one[0], "greedy_tokens": 32, "runs": runs,
                                 "ttft": long}, work)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
    ref_text = sp.decode(base["greedy"])
    # inferd: warm-up, the greedy check, then the same runs.
    inferd_run(port, model, prompts(2, 16, 9), 8)
    greedy = inferd_run(port, model, one, 32)["texts"][0]
    ours = {"1 sequence": inferd_run(port, model, one, 256), "16 sequences": inferd_run(port, model, sixteen, 128)}
    ttft = inferd_run(port, model, [long], 1)["ttft_s"]
    for r in ours.values():
        del r["texts"]
    rows = []
    for label in ("1 sequence", "16 sequences"):
        same = next(r for r in base["runs"] if r["label"] == label)
        alt = [r for r in base["runs"] if r["label"] == label + ", 1 thread"]
        best = max([same] + alt, key=lambda r: r["decode_tokens_per_s"])
        rows.append({"label": label, "inferd": ours[label]["decode_tokens_per_s"],
                     "llama_cpp": same["decode_tokens_per_s"], "llama_cpp_best": best["decode_tokens_per_s"],
                     "llama_cpp_best_threads": best["threads"],
                     "ratio": ours[label]["decode_tokens_per_s"] / best["decode_tokens_per_s"]})
    return {"threads": threads, "weights": "int8 / Q8_0" if q8_0 else "F32", "greedy_equal": greedy == ref_text,
            "greedy_inferd": greedy,
            "greedy_llama_cpp": ref_text, "rows": rows, "inferd_runs": ours, "llama_cpp": base,
            "ttft_512_s": {"inferd": ttft, "llama_cpp": base["ttft_512_s"],
                           "ratio": ttft / base["ttft_512_s"]}}


def markdown(rep):
    q8 = rep.get("weights", "F32") != "F32"
    out = ["| decode tokens/s (threads %d) | inferd%s | llama.cpp %s (same threads) | llama.cpp best (threads) | "
           "inferd / llama.cpp best |" % (rep["threads"], " int8" if q8 else "", "Q8_0" if q8 else "F32"),
           "|---|---:|---:|---:|---:|"]
    for r in rep["rows"]:
        out.append("| %s | %.1f | %.1f | %.1f (%d) | **%.2f** |" % (r["label"], r["inferd"], r["llama_cpp"],
                                                                  r["llama_cpp_best"], r["llama_cpp_best_threads"],
                                                                  r["ratio"]))
    t = rep["ttft_512_s"]
    out += ["", "TTFT of a 512-token prompt: inferd %.1f ms, llama.cpp %.1f ms (inferd / llama.cpp %.2f). Greedy "
            "outputs (32 tokens): %s." % (1e3 * t["inferd"], 1e3 * t["llama_cpp"], t["ratio"],
                                          "equal" if rep["greedy_equal"] else "DIFFERENT")]
    if rep.get("agreement"):
        a = rep["agreement"]
        out += ["", "int8 against FP32 (inferd both, greedy, %d prompts x %d tokens): teacher-forced tokens equal "
                "**%.1f%%**; running free, the first %.1f tokens equal on average." % (
                    a["prompts"], a["tokens"] // max(1, a["prompts"]), 100 * a["teacher_forced_equal"],
                    a["free_running_equal_prefix_mean"])]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--model-dir", required=True, help="a Llama folder (config.json, model.safetensors, "
                                                        "tokenizer.model)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--int8", action="store_true", help="inferd with quantization int8 against llama.cpp's Q8_0, "
                                                          "and int8's greedy agreement with FP32")
    ap.add_argument("--out")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="inferd-llamacpp-")
    repo = os.path.join(work, "repo")
    os.makedirs(os.path.join(repo, "m"))
    shutil.copytree(a.model_dir, os.path.join(repo, "m", "1"))
    for name, quant in (("m", "none"), ("m8", "int8")):
        if name == "m8":
            shutil.copytree(a.model_dir, os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write('name: "%s"\nbackend: "llm"\nparameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "%d" } }\n'
                    'parameters { key: "kv_cache_bytes" value: { string_value: "%d" } }\n'
                    'parameters { key: "quantization" value: { string_value: "%s" } }\n' % (name, a.threads, 512 << 20, quant))
    port = rb.free_port()
    p = rb.Proc([a.inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port", "0",
                 "--grpc-port", "0", "--host", "127.0.0.1", "--log-level", "warn"],
                port, "/v2/health/ready", os.path.join(work, "inferd.log"))
    try:
        if a.int8:
            rep = compare(port, "m8", os.path.join(repo, "m", "1"), work, a.threads, q8_0=True)
            rep["agreement"] = agreement(port, "m", "m8", prompts(8, 64, 4), 64)
        else:
            rep = compare(port, "m", os.path.join(repo, "m", "1"), work, a.threads)
    finally:
        p.stop()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rep, f, indent=1)
    print(markdown(rep))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
