#!/usr/bin/python3
"""A copying language model built by hand (no training), of bench_llama's size (8 layers, hidden 512, ~27M
parameters, F32): the speculative-decoding bench's stand-in for a model that summarises by quoting its prompt, at a
size where a decode step is memory-bound as it is for real models (a trained model that copies would take hours of
CPU here; the trained example license_chat is measured too, but is small enough to be compute-bound).

Its behaviour is an induction circuit, the mechanism trained transformers use to copy:
- layer 0, heads 0 and 1 attend to the previous position and the one before (rotary phases tuned so the score
  peaks at distance 1 or 2) and write those tokens' codes into subspaces of the residual stream;
- layer 1, head 0 matches the current and previous tokens' codes against every position's two predecessors (in the slowest
  rotary pairs, which barely rotate: a content match), with a recency term (a slow rotary pair whose cosine falls
  with distance) so the latest earlier occurrence wins, and copies the token found there into an output subspace;
- the lm_head reads the output subspace: the next token is the one that followed the latest earlier occurrence of
  the current pair of tokens. Every other weight is zero (read and multiplied all the same).
(The match is on two tokens: the current and the previous one, with one alone as the fallback, so spans are copied
faithfully.) Token codes are unit vectors spread apart by a few hundred repulsion steps.

Usage: copy_model.py OUT_DIR  (writes config.json, model.safetensors and a SentencePiece tokenizer there)"""
import json
import math
import os
import sys

import sentencepiece as spm
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "backends", "llm", "testdata"))
import reference  # noqa: E402

CONFIG = {"model_type": "llama", "vocab_size": 1024, "hidden_size": 512, "num_hidden_layers": 8,
          "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 1408,
          "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 1e9,
          "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}
H, D, V = 512, 128, 1024
# Residual subspaces: the token's output code, a constant, its match code, the match codes of the previous token and
# of the one before, the predicted next token's output code.
C, BIAS, M, P, P2, O = 0, 64, 96, 128, 160, 256
CODE, MCODE = 64, 32
PREV_PAIRS = range(0, 8)              # fast rotary pairs: the previous-token heads
PREV_AB = 256.0
RECENCY_PAIR = 20                     # theta 1.5e-3: its sine rises over ~1000 positions
RECENCY_R = 30.0
CONTENT_PAIRS = range(32, 64)         # theta <= 3.2e-5: a content match anywhere in 4096 positions
MATCH = 10.0                          # q and k scale of the match codes


def codes(n_dims, seed, steps=300):
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(V, n_dims, generator=g, dtype=torch.float64)
    e = e / e.norm(dim=1, keepdim=True)
    for _ in range(steps):  # push the most similar pairs apart
        s = e @ e.T - 2 * torch.eye(V, dtype=torch.float64)
        e = e - 0.05 * torch.softmax(s * 20, dim=1) @ e
        e = e / e.norm(dim=1, keepdim=True)
    return e


def build():
    inv = 1.0 / (CONFIG["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    e, m = codes(CODE, 0), codes(MCODE, 1)
    W = {n: torch.zeros(s, dtype=torch.float64) for n, s in reference.llama_shapes(CONFIG, False).items()}
    for n in W:
        if n.endswith("norm.weight"):
            W[n] += 1.0
    emb = W["model.embed_tokens.weight"]
    emb[:, C:C + CODE] = 8 * e
    emb[:, BIAS] = 8.0
    emb[:, M:M + MCODE] = 8 * m
    # Layer 0 input: |x|^2 = 192 over 512 dims: h = x * s0.
    s0 = math.sqrt(512 / 192)
    l0 = "model.layers.0."
    q, k, v, o = (W[l0 + "self_attn.%s_proj.weight" % n] for n in "qkvo")
    for head, dist, into in ((0, 1, P), (1, 2, P2)):
        base = head * D
        for i in PREV_PAIRS:  # sum_i a*b*cos((d - dist) theta_i) / sqrt(D): peaks at distance dist (margin ~20)
            q[base + i, BIAS] = PREV_AB * math.cos(dist * inv[i]) / (8 * s0)
            q[base + i + D // 2, BIAS] = -PREV_AB * math.sin(dist * inv[i]) / (8 * s0)
            k[base + i, BIAS] = 1.0 / (8 * s0)
        for r in range(MCODE):
            v[base + r, M + r] = 1.0 / s0   # that position's match code (8 m)
            o[into + r, base + r] = 1.0
    # Layer 1 input: + previous and previous-but-one match codes: |x|^2 = 320.
    s1 = math.sqrt(512 / 320)
    l1 = "model.layers.1."
    q, k, v, o = (W[l1 + "self_attn.%s_proj.weight" % n] for n in "qkvo")
    pairs = list(CONTENT_PAIRS)

    def slow(r):  # the r-th of the 64 slow dims (both halves of 32 pairs)
        return pairs[r // 2] + (D // 2 if r % 2 else 0)

    for r in range(MCODE):
        # q = (current, previous) codes; k = (previous, previous-but-one) of the key position: a match of both
        # scores 2 * MATCH^2 * 64 / sqrt(128) = 1131, of one ~566 (+ a coherence), of none ~0.
        q[slow(r), M + r] = MATCH / s1
        q[slow(MCODE + r), P + r] = MATCH / s1
        k[slow(r), P + r] = MATCH / s1
        k[slow(MCODE + r), P2 + r] = MATCH / s1
    for r in range(CODE):
        v[r, C + r] = 1.0 / s1
        o[O + r, r] = 1.0
    # Recency: - R sin(d theta) (d theta < pi / 2 up to ~1000 positions): a nearer occurrence scores higher, by
    # R theta per position, never by more than R (well under a match's margin).
    q[RECENCY_PAIR + D // 2, BIAS] = math.sqrt(RECENCY_R * math.sqrt(D)) / (8 * s1)
    k[RECENCY_PAIR, BIAS] = math.sqrt(RECENCY_R * math.sqrt(D)) / (8 * s1)
    W["lm_head.weight"][:, O:O + CODE] = 40 * e
    return W


def make_tokenizer(out):
    """A SentencePiece BPE vocabulary of 1024 on two licenses (the bench's prompts are license paragraphs)."""
    corpus = os.path.join(out, "corpus.txt")
    with open(corpus, "w") as f:
        for name in ("GPL-3", "Apache-2.0"):
            f.write(open(os.path.join("/usr/share/common-licenses", name), encoding="utf-8").read())
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(out, "tokenizer"), vocab_size=V,
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0, bos_id=1, eos_id=2,
                                   unk_id=0, pad_id=-1, minloglevel=2, num_threads=1)
    os.remove(corpus)
    os.remove(os.path.join(out, "tokenizer.vocab"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True}, f)


def main(out):
    os.makedirs(out, exist_ok=True)
    make_tokenizer(out)
    W = build()
    reference.write_safetensors(os.path.join(out, "model.safetensors"), {n: t.float() for n, t in W.items()}, "F32")
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(CONFIG, f)


if __name__ == "__main__":
    main(sys.argv[1])
