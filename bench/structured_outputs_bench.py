#!/usr/bin/python3
"""Structured outputs under load (part E of `make bench-generative`, issue 39's targets): 200 answers under JSON
schemas (nested objects, arrays, enums, bounded numbers, patterns) from 16 concurrent clients, sampled at
temperature 1 (random weights: the grammar alone keeps them valid), every answer validated with jsonschema; the
time spent computing token masks (the server's inferd_structured_output_mask_seconds_total) against the wall time of
the run, the decoding loop being busy throughout; and tokens/s against the same load without a schema.

Targets: 100% valid; mask time <= 10% of decode time at 16 sequences.
Usage: structured_outputs_bench.py --inferd build/src/inferd --model-dir DIR (a bench_llama folder), or compare()
from generative_bench.py."""
import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402

SCHEMAS = [
    {"type": "object", "properties": {
        "user": {"type": "object", "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 10},
            "age": {"type": "integer", "minimum": 13, "maximum": 120},
            "email_ok": {"type": "boolean"}}, "required": ["name", "age"]},
        "plan": {"enum": ["free", "pro", "team"]},
        "seats": {"type": "integer", "minimum": 1, "maximum": 500}},
     "required": ["user", "plan", "seats"], "additionalProperties": False},
    {"type": "object", "properties": {
        "lines": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
            "qty": {"type": "integer", "minimum": 1, "maximum": 20},
            "unit_price": {"type": "number", "minimum": 0.01, "maximum": 999.99}}, "required": ["sku", "qty", "unit_price"]}},
        "currency": {"enum": ["EUR", "USD", "GBP"]},
        "discount": {"type": "number", "minimum": 0, "maximum": 0.5}},
     "required": ["lines", "currency"]},
    {"type": "array", "minItems": 1, "maxItems": 5, "items": {"type": "object", "properties": {
        "lat": {"type": "number", "minimum": -90, "maximum": 90},
        "lon": {"type": "number", "minimum": -180, "maximum": 180},
        "label": {"type": ["string", "null"], "maxLength": 6}}, "required": ["lat", "lon", "label"]}},
    {"type": "object", "properties": {
        "sentiment": {"enum": ["positive", "neutral", "negative"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "topics": {"type": "array", "items": {"enum": ["price", "support", "speed", "ui"]}, "maxItems": 3},
        "when": {"type": "string", "format": "date"}},
     "required": ["sentiment", "confidence", "topics"]},
]


def post(port, path, body, timeout=300):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)


def metric(mport, name, model):
    c = http.client.HTTPConnection("127.0.0.1", mport, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(name + "{") and 'model="%s"' % model in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def run(port, bodies, concurrency):
    """Posts every body from `concurrency` clients; returns ([(body, status, answer)], seconds)."""
    out, lock, todo = [], threading.Lock(), list(enumerate(bodies))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i, body = todo.pop(0)
            status, answer = post(port, "/v1/completions", body)
            with lock:
                out.append((i, body, status, answer))

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(out, key=lambda x: x[0]), time.monotonic() - t0


def compare(port, mport, model, n=200, concurrency=16):
    bodies = [{"model": model, "prompt": "Reply with JSON (%d):" % i, "max_tokens": 1500, "temperature": 1.0,
               "seed": i, "guided_json": SCHEMAS[i % len(SCHEMAS)]} for i in range(n)]
    run(port, bodies[:len(SCHEMAS)], len(SCHEMAS))  # warm-up: each schema compiled once
    names = ["inferd_structured_output_mask_seconds_total", "inferd_structured_output_masks_total",
             "vllm:generation_tokens_total"]
    before = {k: metric(mport, k, model) for k in names}
    answers, seconds = run(port, bodies, concurrency)
    after = {k: metric(mport, k, model) for k in names}
    valid, finish, tokens, failures = 0, {}, 0, []
    for i, body, status, answer in answers:
        if status != 200:
            failures.append((i, status, str(answer)[:200]))
            continue
        choice = answer["choices"][0]
        finish[choice["finish_reason"]] = finish.get(choice["finish_reason"], 0) + 1
        tokens += answer["usage"]["completion_tokens"]
        try:
            jsonschema.validate(json.loads(choice["text"]), body["guided_json"])
            valid += 1
        except (ValueError, jsonschema.ValidationError) as e:
            failures.append((i, "invalid", str(e)[:200], choice["text"][:200]))
    mask_s = after[names[0]] - before[names[0]]
    masks = after[names[1]] - before[names[1]]
    # The same load without a schema: as many tokens per request (the structured answers' mean), ignore_eos.
    mean_tokens = max(1, round(tokens / max(1, len(answers))))
    plain = [{"model": model, "prompt": "Reply with JSON (%d):" % i, "max_tokens": mean_tokens, "temperature": 1.0,
              "seed": i, "ignore_eos": True} for i in range(n)]
    plain_answers, plain_seconds = run(port, plain, concurrency)
    plain_tokens = sum(a["usage"]["completion_tokens"] for _, _, s, a in plain_answers if s == 200)
    return {"answers": n, "concurrency": concurrency, "valid": valid, "finish_reasons": finish,
            "failures": failures[:5], "seconds": seconds, "completion_tokens": tokens,
            "tokens_per_s": tokens / seconds, "mask_seconds": mask_s, "masks": masks,
            "mask_us_mean": 1e6 * mask_s / max(1.0, masks), "mask_fraction_of_decode": mask_s / seconds,
            "plain_tokens_per_s": plain_tokens / plain_seconds,
            "tokens_per_s_ratio_vs_plain": (tokens / seconds) / (plain_tokens / plain_seconds)}


def markdown(r):
    valid = 100.0 * r["valid"] / r["answers"]
    mask = 100.0 * r["mask_fraction_of_decode"]
    return "\n".join([
        "| target | measured | target met |", "|---|---|---|",
        "| answers valid under their schema (jsonschema), 100%% | %d of %d (%.1f%%); finish reasons %s | %s |"
        % (r["valid"], r["answers"], valid, r["finish_reasons"], "yes" if r["valid"] == r["answers"] else "no"),
        "| token-mask time <= 10%% of decode time at %d sequences | %.3f s of masks (%d, %.1f us each) in %.1f s: "
        "%.2f%% | %s |" % (r["concurrency"], r["mask_seconds"], r["masks"], r["mask_us_mean"], r["seconds"], mask,
                           "yes" if mask <= 10 else "no"),
        "", "Tokens/s with schemas %.1f, without (same load, ignore_eos, as many tokens) %.1f: %.2fx."
        % (r["tokens_per_s"], r["plain_tokens_per_s"], r["tokens_per_s_ratio_vs_plain"])])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--model-dir", required=True, help="a bench_llama version folder (generative_bench.make_model)")
    ap.add_argument("--out")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="inferd-sobench-")
    repo = os.path.join(work, "repo")
    shutil.copytree(os.path.dirname(os.path.abspath(a.model_dir)), os.path.join(repo, "bench_llama"))
    port, mport, gport = rb.free_port(), rb.free_port(), rb.free_port()
    p = rb.Proc([a.inferd, "serve", "--model-repository", repo, "--http-port", str(port), "--metrics-port", str(mport),
                 "--grpc-port", str(gport), "--host", "127.0.0.1", "--log-level", "warn"],
                port, "/v2/health/ready", os.path.join(work, "inferd.log"))
    try:
        rep = compare(port, mport, "bench_llama")
    finally:
        p.stop()
    print(json.dumps(rep, indent=1))
    print(markdown(rep))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rep, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
