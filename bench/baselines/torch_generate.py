#!/usr/bin/python3
"""Baseline for `make bench-generative`: a Python generate loop with a KV cache in python3-torch over the same
weights inferd serves (model.safetensors + config.json of a Llama-architecture model), the way a team would serve
it without an engine: `batch` sequences decoded together, one forward per token, keys and values kept and extended
per layer. Greedy; equal-length prompts (no padding); intra-op threads as given.

Prints one JSON line: {"batch", "prompt_tokens", "output_tokens", "prefill_s", "decode_s", "decode_tokens_per_s",
"total_tokens_per_s"}.

Usage: torch_generate.py MODEL_DIR [--batch 16] [--prompt-tokens 64] [--output-tokens 128] [--threads 2]"""
import argparse
import json
import math
import os
import struct
import time

import torch
import torch.nn.functional as F


def load(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    W = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", "the baseline reads F32 weights"
        b, end = e["data_offsets"]
        W[name] = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + end]), dtype=torch.float32).reshape(e["shape"])
    return c, W


class Llama:
    def __init__(self, c, W):
        self.c, self.W = c, W
        self.H, self.nh, self.nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.D = self.H // self.nh
        self.head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
        self.inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, self.D, 2).float() / self.D))

    def rms(self, x, w):
        return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"])

    def forward(self, ids, pos0, cache):
        """ids [B, T]; cache: per layer (K, V) [B, nkv, past, D] or None. Returns last logits [B, V]."""
        B, T = ids.shape
        W, D = self.W, self.D
        ang = torch.arange(pos0, pos0 + T).float()[:, None] * self.inv[None]
        cos, sin = torch.cos(ang), torch.sin(ang)

        def rope(t):
            a, b = t[..., : D // 2], t[..., D // 2:]
            return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)

        x = W["model.embed_tokens.weight"][ids]
        for l in range(self.c["num_hidden_layers"]):
            p = f"model.layers.{l}."
            h = self.rms(x, W[p + "input_layernorm.weight"])
            q = rope((h @ W[p + "self_attn.q_proj.weight"].T).view(B, T, self.nh, D).transpose(1, 2))
            k = rope((h @ W[p + "self_attn.k_proj.weight"].T).view(B, T, self.nkv, D).transpose(1, 2))
            v = (h @ W[p + "self_attn.v_proj.weight"].T).view(B, T, self.nkv, D).transpose(1, 2)
            if cache[l] is not None:
                k = torch.cat([cache[l][0], k], 2)
                v = torch.cat([cache[l][1], v], 2)
            cache[l] = (k, v)
            rep = self.nh // self.nkv
            kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            s = (q @ kk.transpose(-1, -2)) / math.sqrt(D)
            if T > 1:
                s = s + torch.triu(torch.full((T, k.shape[2]), float("-inf")), 1 + k.shape[2] - T)
            a = torch.softmax(s, -1) @ vv
            x = x + a.transpose(1, 2).reshape(B, T, self.H) @ W[p + "self_attn.o_proj.weight"].T
            h = self.rms(x, W[p + "post_attention_layernorm.weight"])
            x = x + (F.silu(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)) @ \
                W[p + "mlp.down_proj.weight"].T
        x = self.rms(x[:, -1], W["model.norm.weight"])
        return x @ self.head.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    c, W = load(a.model_dir)
    m = Llama(c, W)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, c["vocab_size"], (a.batch, a.prompt_tokens), generator=g)
    with torch.inference_mode():
        cache = [None] * c["num_hidden_layers"]
        t0 = time.perf_counter()
        nxt = m.forward(ids, 0, cache).argmax(-1, keepdim=True)
        t1 = time.perf_counter()
        for step in range(a.output_tokens - 1):
            nxt = m.forward(nxt, a.prompt_tokens + step, cache).argmax(-1, keepdim=True)
        t2 = time.perf_counter()
    decode_tokens = a.batch * (a.output_tokens - 1)
    print(json.dumps({"batch": a.batch, "prompt_tokens": a.prompt_tokens, "output_tokens": a.output_tokens,
                      "prefill_s": t1 - t0, "decode_s": t2 - t1, "decode_tokens_per_s": decode_tokens / (t2 - t1),
                      "total_tokens_per_s": a.batch * a.output_tokens / (t2 - t0)}))


if __name__ == "__main__":
    main()
