#!/usr/bin/python3
"""Greedy agreement of `quantization: int8` with FP32 on a trained model (issue 39's accuracy target), on text
prompts: the model folder served twice (FP32 and int8), the FP32 greedy continuation of each prompt, then the token
int8 picks after every prefix of it (teacher-forced), and how long both agree running free
(llama_cpp_compare.agreement). On random weights (bench_llama) the logits are nearly flat and near-ties flip; a
trained model is the meaningful case: `make examples-all` trains license_chat (examples/repository/license_chat/1).

Usage: int8_agreement.py --inferd build/src/inferd --model-dir DIR [--prompts 8] [--tokens 64]
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


def measure(inferd, model_dir, n_prompts=8, tokens=64):
    work = tempfile.mkdtemp(prefix="inferd-int8-")
    repo = os.path.join(work, "repo")
    for name, quant in (("fp32", "none"), ("int8", "int8")):
        shutil.copytree(model_dir, os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write('name: "%s"\nbackend: "llm"\nparameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "2" } }\n'
                    'parameters { key: "quantization" value: { string_value: "%s" } }\n' % (name, quant))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
    paragraphs = [p.strip() for p in open("/usr/share/common-licenses/Apache-2.0").read().split("\n\n") if p.strip()]
    prompts = [[1] + sp.encode(p)[:48] for p in paragraphs[5:5 + n_prompts]]
    port = rb.free_port()
    p = rb.Proc([inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port", "0",
                 "--grpc-port", "0", "--host", "127.0.0.1", "--log-level", "warn"],
                port, "/v2/health/ready", os.path.join(work, "inferd.log"))
    try:
        return llama_cpp_compare.agreement(port, "fp32", "int8", prompts, tokens)
    finally:
        p.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    a = ap.parse_args()
    print(json.dumps(measure(a.inferd, a.model_dir, a.prompts, a.tokens)))


if __name__ == "__main__":
    main()
