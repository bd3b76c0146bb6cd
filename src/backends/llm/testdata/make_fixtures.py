#!/usr/bin/python3
"""Fixtures for the llm tests: tiny Llama-, Qwen2- and GPT-2-shaped decoders with random weights in the Hugging
Face layout, their logits and greedy continuations from an independent reference written here (float64, no KV
cache, explicit rotations), a byte-level BPE (vocab.json + merges.txt and tokenizer.json) with ids from OpenAI's
GPT-2 encoding algorithm, and a SentencePiece model with ids from python3-sentencepiece.

Usage: make_fixtures.py OUT_DIR"""
import json
import math
import os
import struct
import sys

import regex
import sentencepiece as spm
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import gpt2_logits, llama_logits, llama_shapes, stored, write_safetensors  # noqa: E402

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)


def make_model(name, config, shapes, forward, dtype="F32", scale=0.3, seed=0):
    """Random weights; re-drawn until every greedy step has a clear winner (ties would make the check flaky)."""
    for attempt in range(50):
        g = torch.Generator().manual_seed(seed * 100 + attempt)
        raw = {}
        for n, shape in shapes.items():
            if n.endswith("norm.weight") or n.endswith("layernorm.weight") or n.split(".")[-2].startswith("ln_"):
                raw[n] = 1.0 + 0.1 * torch.randn(shape, generator=g) if n.endswith("weight") else 0.1 * torch.randn(shape, generator=g)
            else:
                raw[n] = scale * torch.randn(shape, generator=g)
        W = {n: stored(t, dtype) for n, t in raw.items()}
        prompt = [int(i) for i in torch.randint(0, config["vocab_size"], (11,), generator=g)]
        ids, ok = list(prompt), True
        for _ in range(12):
            last = forward(W, config, ids)[-1]
            top = torch.topk(last, 2).values
            if top[0] - top[1] < 1e-2:
                ok = False
                break
            ids.append(int(torch.argmax(last)))
        if ok:
            break
    else:
        raise SystemExit(f"{name}: no weights with clear greedy steps")
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"), raw, dtype)
    logits = forward(W, config, prompt)
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump({"prompt": prompt, "logits": logits.tolist(), "greedy": ids[len(prompt):]}, f)


def gpt2_shapes(c):
    H, V, P = c["n_embd"], c["vocab_size"], c["n_positions"]
    s = {"wte.weight": (V, H), "wpe.weight": (P, H), "ln_f.weight": (H,), "ln_f.bias": (H,)}
    for l in range(c["n_layer"]):
        p = f"h.{l}."
        s.update({p + "ln_1.weight": (H,), p + "ln_1.bias": (H,), p + "ln_2.weight": (H,), p + "ln_2.bias": (H,),
                  p + "attn.c_attn.weight": (H, 3 * H), p + "attn.c_attn.bias": (3 * H,),
                  p + "attn.c_proj.weight": (H, H), p + "attn.c_proj.bias": (H,),
                  p + "mlp.c_fc.weight": (H, 4 * H), p + "mlp.c_fc.bias": (4 * H,),
                  p + "mlp.c_proj.weight": (4 * H, H), p + "mlp.c_proj.bias": (H,)})
    return s


llama = {"model_type": "llama", "vocab_size": 96, "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 112, "max_position_embeddings": 256,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "hidden_act": "silu",
         "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
make_model("llama", llama, llama_shapes(llama, False), llama_logits, seed=1)
make_model("llama_bf16", dict(llama, torch_dtype="bfloat16"), llama_shapes(llama, False), llama_logits, "BF16", seed=2)
qwen = dict(llama, model_type="qwen2", tie_word_embeddings=True, num_key_value_heads=4, rope_theta=1000000.0)
make_model("qwen2", qwen, llama_shapes(qwen, True), llama_logits, "F16", seed=3)
gpt2 = {"model_type": "gpt2", "vocab_size": 80, "n_embd": 48, "n_layer": 2, "n_head": 4, "n_positions": 128,
        "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "bos_token_id": 79, "eos_token_id": 79}
make_model("gpt2", gpt2, gpt2_shapes(gpt2), gpt2_logits, seed=4)

# --- Tokenizers -----------------------------------------------------------------------------------------------
TEXT = """The quick brown fox jumps over the lazy dog. It's 2026, and they'll say we've done it; I'm sure you'd agree!
Numbers: 3.14159, 42, 1000000 and 7th. Café naïve résumé — Ünïcödé text, 日本語のテキスト, emoji 🙂🚀 and tabs\tand
   several   spaces   here.\n\nNew paragraph: don't stop; can't stop. HELLO World! hello world? (parentheses) [brackets]
"""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
B2U = bytes_to_unicode()


def train_bpe(text, merges_wanted):
    words = {}
    for w in PAT.findall(text):
        key = tuple(B2U[b] for b in w.encode())
        words[key] = words.get(key, 0) + 1
    merges = []
    for _ in range(merges_wanted):
        pairs = {}
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + n
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        new = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = n
        words = new
    return merges


def gpt2_encode(text, ranks, vocab):
    """OpenAI's GPT-2 encoder.py algorithm."""
    ids = []
    for tok in PAT.findall(text):
        word = tuple(B2U[b] for b in tok.encode())
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
            if best not in ranks:
                break
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = tuple(out)
        ids.extend(vocab[s] for s in word)
    return ids


merges = train_bpe(TEXT * 3, 300)
vocab = {B2U[b]: i for i, b in enumerate(sorted(B2U))}
for a, b in merges:
    if a + b not in vocab:
        vocab[a + b] = len(vocab)
vocab["<|endoftext|>"] = len(vocab)
ranks = {m: i for i, m in enumerate(merges)}
bpe_dir = os.path.join(OUT, "bpe")
os.makedirs(bpe_dir, exist_ok=True)
with open(os.path.join(bpe_dir, "vocab.json"), "w") as f:
    json.dump(vocab, f, ensure_ascii=False)
with open(os.path.join(bpe_dir, "merges.txt"), "w") as f:
    f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
with open(os.path.join(bpe_dir, "tokenizer.json"), "w") as f:
    json.dump({"version": "1.0", "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>",
                                                   "single_word": False, "lstrip": False, "rstrip": False,
                                                   "normalized": True, "special": True}],
               "normalizer": None,
               "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
               "decoder": {"type": "ByteLevel"},
               "model": {"type": "BPE", "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}, f, ensure_ascii=False)
SAMPLES = [TEXT, "Hello world", "  leading spaces and trailing   ", "a\n\n\nb\r\nc", "x's y'll z'd 'quoted'",
           "🙂", "数字123と４５６", "mixed-CASE_words and_under_scores", "", "\t\t", "end with space ",
           "naïve café", "!!!???...", "Ⅻ roman numeral ½ fraction"]
with open(os.path.join(bpe_dir, "reference.json"), "w") as f:
    json.dump([{"text": s, "ids": gpt2_encode(s, ranks, vocab)} for s in SAMPLES], f, ensure_ascii=False)

sp_dir = os.path.join(OUT, "sentencepiece")
os.makedirs(sp_dir, exist_ok=True)
with open(os.path.join(sp_dir, "corpus.txt"), "w") as f:
    f.write(TEXT * 5)
spm.SentencePieceTrainer.train(input=os.path.join(sp_dir, "corpus.txt"), model_prefix=os.path.join(sp_dir, "tokenizer"),
                               vocab_size=400, model_type="bpe", byte_fallback=True, character_coverage=0.995,
                               bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2)
sp = spm.SentencePieceProcessor(model_file=os.path.join(sp_dir, "tokenizer.model"))
with open(os.path.join(sp_dir, "reference.json"), "w") as f:
    json.dump([{"text": s, "ids": sp.encode(s), "decoded": sp.decode(sp.encode(s))} for s in SAMPLES], f,
              ensure_ascii=False)
print("fixtures in", OUT)

# --- LoRA adapters over the llama fixture and the same models merged (W + scale * B A) --------------------------
from reference import lora_tensors, merge_lora, read_safetensors, write_lora  # noqa: E402

base = read_safetensors(os.path.join(OUT, "llama", "model.safetensors"))
lora_dir = os.path.join(OUT, "llama_lora")
for name, r, alpha, targets, rslora, layers, dtype, seed in [
        ("qv", 4, 8, ["q_proj", "v_proj"], False, None, "F32", 11),
        ("all", 8, 16, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], True, None,
         "F16", 12),
        ("late", 2, 2, ["k_proj", "o_proj", "down_proj"], False, [1], "BF16", 13)]:
    t = lora_tensors(llama, r, targets, seed, layers)
    write_lora(os.path.join(lora_dir, name), r, alpha, targets, t, dtype, rslora, layers)
    scaling = alpha / math.sqrt(r) if rslora else alpha / r
    merged = merge_lora(base, t, scaling, dtype)
    d = os.path.join(lora_dir, "merged_" + name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(llama, f, indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"), merged, "F32")
