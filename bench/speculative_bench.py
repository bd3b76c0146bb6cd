#!/usr/bin/python3
"""Prompt-lookup speculative decoding (part F of `make bench-generative`, issue 39's target): decode tokens/s with
`speculative_decoding: prompt_lookup` against the same model without it (one server, the model folder served twice:
"plain" and "speculative"), greedy, streamed over the OpenAI API, the texts compared.

Models:
- copy: bench/copy_model.py, a copying model built by hand at bench_llama's size (memory-bound steps, as real
  models' are): it quotes its prompt the way an extractive summary does (spans, jumping where two tokens recur).
  Prompts: "Summarise this text." + a license paragraph + "Summary:" and the paragraph's first words.
- random: bench_llama's shape with random weights (generative_bench.make_model): its text is not the prompt's, but
  it soon repeats itself, and drafts from its own output are kept.
- license_chat (when given): the trained example model, small (compute-bound steps: the worst case for extra rows),
  asked about a license with the paragraph it quotes in the prompt, and asked without it (drafts rarely right:
  speculation must cost nothing there: the adaptive length and the automatic pause).
At 1 sequence and at 16 (above speculative_max_batch: no drafts).

Targets: >= 1.5x tokens/s at 1 sequence on the summarise prompts; no slower where drafts do not pay.
Usage: speculative_bench.py --inferd build/src/inferd [--license-chat DIR] [--out FILE]"""
import argparse
import http.client
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import copy_model  # noqa: E402
import generative_bench  # noqa: E402
import run_bench as rb  # noqa: E402

LICENSES = "/usr/share/common-licenses"


def paragraphs(name, lo=200, hi=900):
    text = open(os.path.join(LICENSES, name), encoding="utf-8", errors="replace").read()
    return [p for p in (re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text)) if lo <= len(p) <= hi]


def summarise_prompts(n=8):
    paras = (paragraphs("Apache-2.0") + paragraphs("GPL-3"))[:n]
    return ["Summarise this text.\n\n%s\n\nSummary: %s" % (p, " ".join(p.split()[:3])) for p in paras]


def license_chat_messages():
    """(quoting, not quoting): license_chat answers "Tell me about X." with two sentences of the license's second
    paragraph (its training data); with that paragraph in the message, the answer is text the prompt holds."""
    names = {"GPL-3": "the GNU General Public License version 3", "Apache-2.0": "the Apache License 2.0",
             "MPL-2.0": "the Mozilla Public License 2.0", "LGPL-3": "the GNU Lesser General Public License version 3",
             "GPL-2": "the GNU General Public License version 2"}
    quoting, plain = [], []
    for f, name in names.items():
        paras = paragraphs(f, 40, 100000)
        if len(paras) < 2:
            continue
        q = "Tell me about %s." % name
        quoting.append([{"role": "user", "content": "Summarise this text.\n\n%s\n\n%s" % (paras[1], q)}])
        plain.append([{"role": "user", "content": q}])
        plain.append([{"role": "user", "content": "What is %s?" % name}])
    return quoting, plain


def generate(port, model, prompt, max_tokens, out):
    """One streamed greedy answer; `prompt` is text (/v1/completions) or chat messages (/v1/chat/completions)."""
    chat = isinstance(prompt, list)
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    body["messages" if chat else "prompt"] = prompt
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions" if chat else "/v1/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d %s" % (r.status, r.read()[:300]))
    got = rb.read_openai_stream(r, chat)
    c.close()
    out.update(got, start=t0)


def one_at_a_time(port, model, prompts, max_tokens):
    """Each prompt alone; decode tokens/s over all of them (first streamed text to last, tokens after the first)."""
    decoded, seconds, texts, total = 0, 0.0, [], 0
    for m in prompts:
        r = {}
        generate(port, model, m, max_tokens, r)
        texts.append(r["text"])
        total += r["tokens"]
        if r["first"] is not None and r["last"] > r["first"]:
            decoded += r["tokens"] - 1
            seconds += r["last"] - r["first"]
    return {"tokens": total, "decode_tokens_per_s": decoded / seconds if seconds else 0.0, "texts": texts}


def together(port, model, prompts, max_tokens):
    results = [dict() for _ in prompts]
    threads = [threading.Thread(target=generate, args=(port, model, m, max_tokens, results[i]))
               for i, m in enumerate(prompts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    start = min(r["first"] for r in results if r["first"])
    end = max(r["last"] for r in results if r["last"])
    decoded = sum(r["tokens"] - 1 for r in results if r["tokens"])
    return {"sequences": len(prompts), "decode_tokens_per_s": decoded / (end - start),
            "texts": [r["text"] for r in results]}


def metrics(mport, model):
    c = http.client.HTTPConnection("127.0.0.1", mport, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for name in ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                 "vllm:spec_decode_num_accepted_tokens_total", "vllm:generation_tokens_total"):
        for line in text.splitlines():
            if line.startswith(name + "{") and 'model="%s"' % model in line:
                out[name.split(":")[1]] = float(line.rsplit(" ", 1)[1])
    return out


def case(port, mport, run, prompts, max_tokens):
    """`run` for the plain model, then the speculative one (twice each, the better kept: this VM's noise)."""
    rep = {}
    for model in ("plain", "speculative"):
        before = metrics(mport, model)
        best = None
        for _ in range(2):
            r = run(port, model, prompts, max_tokens)
            if best is None or r["decode_tokens_per_s"] > best["decode_tokens_per_s"]:
                best = r
        after = metrics(mport, model)
        best["counters"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        rep[model] = best
    p, s = rep["plain"], rep["speculative"]
    c = s["counters"]
    return {"plain_tokens_per_s": p["decode_tokens_per_s"], "speculative_tokens_per_s": s["decode_tokens_per_s"],
            "ratio": s["decode_tokens_per_s"] / p["decode_tokens_per_s"],
            "identical_texts": sum(a == b for a, b in zip(p["texts"], s["texts"])), "prompts": len(prompts),
            "drafted": c.get("spec_decode_num_draft_tokens_total", 0),
            "accepted": c.get("spec_decode_num_accepted_tokens_total", 0),
            "acceptance": c.get("spec_decode_num_accepted_tokens_total", 0) /
            max(1.0, c.get("spec_decode_num_draft_tokens_total", 0)),
            "tokens_per_step": c.get("generation_tokens_total", 0) /
            max(1.0, c.get("generation_tokens_total", 0) - c.get("spec_decode_num_accepted_tokens_total", 0)),
            "sample": s["texts"][0][:160]}


def serve(inferd, work, model_dir, threads, extra=()):
    repo = os.path.join(work, "repo")
    shutil.rmtree(repo, ignore_errors=True)
    for name, mode in (("plain", "off"), ("speculative", "prompt_lookup")):
        shutil.copytree(model_dir, os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write('name: "%s"\nbackend: "llm"\n' % name)
            for k, v in [("INTRA_OP_THREAD_COUNT", str(threads)), ("speculative_decoding", mode)] + list(extra):
                f.write('parameters { key: "%s" value: { string_value: "%s" } }\n' % (k, v))
    port, mport = rb.free_port(), rb.free_port()
    p = rb.Proc([inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port", str(mport),
                 "--grpc-port", "0", "--host", "127.0.0.1", "--log-level", "warn"],
                port, "/v2/health/ready", os.path.join(work, "inferd.log"))
    return p, port, mport


def measure(inferd, license_chat=None, threads=2, max_tokens=128):
    work = tempfile.mkdtemp(prefix="inferd-spec-")
    rep = {"threads": threads, "max_tokens": max_tokens}
    try:
        copy_dir = os.path.join(work, "copy", "1")
        copy_model.main(copy_dir)
        summaries = summarise_prompts()
        p, port, mport = serve(inferd, work, copy_dir, threads)
        try:
            for model in ("plain", "speculative"):  # warm-up
                one_at_a_time(port, model, summaries[:1], 16)
            rep["copy_summarise_1"] = case(port, mport, one_at_a_time, summaries, max_tokens)
            rep["copy_summarise_16"] = case(port, mport, together, (summaries * 2)[:16], max_tokens)
        finally:
            p.stop()
        random_dir = generative_bench.make_model(os.path.join(work, "random"))
        p, port, mport = serve(inferd, work, random_dir, threads)
        try:
            one_at_a_time(port, "plain", summaries[:1], 16)
            rep["random_summarise_1"] = case(port, mport, one_at_a_time, summaries, max_tokens)
        finally:
            p.stop()
        if license_chat:
            quoting, plain = license_chat_messages()
            p, port, mport = serve(inferd, work, license_chat, threads)
            try:
                one_at_a_time(port, "plain", plain[:1], 16)
                rep["license_chat_quoting_1"] = case(port, mport, one_at_a_time, quoting, max_tokens)
                rep["license_chat_questions_1"] = case(port, mport, one_at_a_time, plain, max_tokens)
            finally:
                p.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rep


def markdown(rep):
    def row(label, r, target):
        return "| %s | %.1f | %.1f | **%.2fx** | %d of %d | %.0f%% of %d | %.2f | %s |" % (
            label, r["plain_tokens_per_s"], r["speculative_tokens_per_s"], r["ratio"], r["identical_texts"],
            r["prompts"], 100 * r["acceptance"], r["drafted"], r["tokens_per_step"], target)

    def met(ok):
        return "met" if ok else "missed"

    c1, c16, r1 = rep["copy_summarise_1"], rep["copy_summarise_16"], rep["random_summarise_1"]
    lines = [
        "| decode tokens/s (greedy, %d threads, %d tokens) | off | prompt lookup | ratio | same text | drafts kept "
        "| tokens per step | target |" % (rep["threads"], rep["max_tokens"]), "|---|---|---|---|---|---|---|---|",
        row("copy model (bench_llama's size), summarise a paragraph, 1 sequence", c1, ">= 1.5x: %s" % met(c1["ratio"] >= 1.5)),
        row("copy model, summarise, 16 sequences (no drafts above speculative_max_batch)", c16,
            "no slower: %s" % met(c16["ratio"] >= 0.95)),
        row("random weights (bench_llama), the same prompts (it repeats itself), 1 sequence", r1,
            "no slower: %s" % met(r1["ratio"] >= 0.95))]
    if "license_chat_quoting_1" in rep:
        q, p = rep["license_chat_quoting_1"], rep["license_chat_questions_1"]
        lines += [row("license_chat (trained, small), asked about a paragraph it quotes, 1 sequence", q, "-"),
                  row("license_chat, questions whose answers are not in the prompt, 1 sequence", p,
                      "no slower: %s" % met(p["ratio"] >= 0.95))]
    lines += ["", "Sample (copy model, speculative): %s" % json.dumps(c1["sample"])]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--license-chat", help="license_chat's version folder (scripts/make_chat_model.py)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--out")
    a = ap.parse_args()
    rep = measure(a.inferd, a.license_chat, a.threads, a.max_tokens)
    print(json.dumps(rep, indent=1))
    print(markdown(rep))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rep, f, indent=1)


if __name__ == "__main__":
    main()
