#!/usr/bin/python3
"""Greedy agreement of `quantization: int8` with FP32 on a trained model (issue 39's accuracy target), on text
prompts: the model folder served twice (FP32 and int8), the FP32 greedy continuation of each prompt, then the token
int8 picks after every prefix of it (teacher-forced), and how long both agree running free
(llama_cpp_compare.agreement). On random weights (bench_llama) the logits are nearly flat and near-ties flip; a
trained model is the meaningful case: `make examples-all` trains license_chat (examples/repository/license_chat/1).

With --speed, also decode tokens/s of both sides in the same server (issue 41's target: int8 >= 1.6x FP32 at one
sequence, where decoding reads every weight per token): one sequence of 128 tokens and 16 sequences of 64, random
prompts of 64 tokens, rounds alternating between the two models, the median of each. --out writes a Markdown report
(and its .json) for every --model-dir given.

--quant bf16: the same against bfloat16 storage (`quantization: bf16`) instead of int8.

Usage: int8_agreement.py --inferd build/src/inferd --model-dir DIR [DIR...] [--prompts 8] [--tokens 64] [--speed]
                         [--rounds 3] [--quant int8|bf16] [--out F.md]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_cpp_compare  # noqa: E402
import run_bench as rb  # noqa: E402


def speed(port, rounds, quant="int8"):
    """Decode tokens/s, fp32 and `quant`, at 1 and 16 sequences: the median of `rounds` alternating rounds."""
    out = {m: {"1": [], "16": []} for m in ("fp32", quant)}
    for m in out:
        llama_cpp_compare.inferd_run(port, m, llama_cpp_compare.prompts(2, 16, 9), 8)  # warm-up
    for r in range(rounds):
        for m in ("fp32", quant) if r % 2 == 0 else (quant, "fp32"):
            one = llama_cpp_compare.inferd_run(port, m, llama_cpp_compare.prompts(1, 64, 1 + r), 128)
            many = llama_cpp_compare.inferd_run(port, m, llama_cpp_compare.prompts(16, 64, 100 + r), 64)
            out[m]["1"].append(one["decode_tokens_per_s"])
            out[m]["16"].append(many["decode_tokens_per_s"])
    med = {m: {k: sorted(v)[len(v) // 2] for k, v in d.items()} for m, d in out.items()}
    return {"rounds": out, "median": med,
            "ratio_1": med[quant]["1"] / med["fp32"]["1"], "ratio_16": med[quant]["16"] / med["fp32"]["16"]}


def measure(inferd, model_dir, n_prompts=8, tokens=64, with_speed=False, rounds=3, quant="int8"):
    work = tempfile.mkdtemp(prefix="inferd-int8-")
    repo = os.path.join(work, "repo")
    for name, q in (("fp32", "none"), (quant, quant)):
        shutil.copytree(model_dir, os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write('name: "%s"\nbackend: "llm"\nparameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "2" } }\n'
                    'parameters { key: "quantization" value: { string_value: "%s" } }\n' % (name, q))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
    paragraphs = [p.strip() for p in open("/usr/share/common-licenses/Apache-2.0").read().split("\n\n") if p.strip()]
    prompts = [[1] + sp.encode(p)[:48] for p in paragraphs[5:5 + n_prompts]]
    port = rb.free_port()
    p = rb.Proc([inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port", "0",
                 "--grpc-port", "0", "--host", "127.0.0.1", "--log-level", "warn"],
                port, "/v2/health/ready", os.path.join(work, "inferd.log"))
    try:
        result = llama_cpp_compare.agreement(port, "fp32", quant, prompts, tokens)
        if with_speed:
            result["speed"] = speed(port, rounds, quant)
        return result
    finally:
        p.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--model-dir", required=True, nargs="+")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quant", choices=("int8", "bf16"), default="int8")
    ap.add_argument("--out")
    a = ap.parse_args()
    results = {}
    for d in a.model_dir:
        results[d] = measure(a.inferd, d, a.prompts, a.tokens, a.speed, a.rounds, a.quant)
        print(json.dumps({d: results[d]}), flush=True)
    if a.out:
        with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
            json.dump(results, f, indent=1)
        with open(a.out, "w") as f:
            f.write(render(results, a))


def render(results, a):
    import datetime
    q = a.quant
    lines = ["# Generative %s against FP32 (issue 41): `bench/int8_agreement.py --quant %s%s`" %
             (q, q, " --speed" if a.speed else ""),
             "", "%s, 2 intra-op threads, greedy. Agreement: %d prompts (Apache-2.0 paragraphs) x %d tokens, the reduced side's "
             "token after every prefix of FP32's continuation (teacher-forced)." %
             (datetime.date.today().isoformat(), a.prompts, a.tokens), ""]
    if a.speed:
        lines += ["| model | weights | tokens equal (teacher-forced) | decode 1 seq FP32 / %s (tokens/s) | ratio | "
                  "16 seqs FP32 / %s | ratio |" % (q, q), "|---|---:|---:|---:|---:|---:|---:|"]
    else:
        lines += ["| model | weights | tokens equal (teacher-forced) |", "|---|---:|---:|"]
    for d, r in results.items():
        size = os.path.getsize(os.path.join(d, "model.safetensors")) / 2**20
        row = "| %s | %.1f MiB FP32 | **%.1f%%** |" % (os.path.basename(os.path.dirname(os.path.abspath(d))) or d, size,
                                                     100 * r["teacher_forced_equal"])
        if a.speed:
            s = r["speed"]["median"]
            row += " %.0f / %.0f | **%.2f** | %.0f / %.0f | %.2f |" % (
                s["fp32"]["1"], s[q]["1"], r["speed"]["ratio_1"], s["fp32"]["16"], s[q]["16"],
                r["speed"]["ratio_16"])
        lines.append(row)
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
