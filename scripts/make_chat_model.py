#!/usr/bin/python3
"""Trains inferd's example chat model, deterministically, in a few minutes on CPU: "license_chat", a small
Llama-architecture decoder (4 layers, hidden 192, grouped-query attention) that answers questions about the free
software licenses Debian ships in /usr/share/common-licenses (package base-files), in the ChatML format.

The tokenizer is a SentencePiece BPE model trained by python3-sentencepiece on the same text; everything is
saved in the Hugging Face layout (config.json, model.safetensors, tokenizer.model, tokenizer_config.json,
generation_config.json) under OUT_DIR/license_chat/1/, with a config.pbtxt naming the llm backend.

Usage: /usr/bin/python3 scripts/make_chat_model.py OUT_DIR [STEPS]"""
import json
import math
import os
import random
import re
import struct
import sys

import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F

LICENSES = "/usr/share/common-licenses"
NAMES = {"GPL-3": "the GNU General Public License version 3", "GPL-2": "the GNU General Public License version 2",
         "LGPL-3": "the GNU Lesser General Public License version 3", "Apache-2.0": "the Apache License 2.0",
         "MPL-2.0": "the Mozilla Public License 2.0", "Artistic": "the Artistic License", "BSD": "the BSD license",
         "CC0-1.0": "the CC0 1.0 Universal dedication", "GFDL-1.3": "the GNU Free Documentation License 1.3"}
SYSTEM = "You are a helpful assistant who knows the free software licenses."
CONFIG = {"model_type": "llama", "vocab_size": 1024, "hidden_size": 192, "num_hidden_layers": 4,
          "num_attention_heads": 6, "num_key_value_heads": 2, "intermediate_size": 512,
          "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True,
          "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}


def paragraphs(text):
    return [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text) if len(p.strip()) > 40]


def sentences(p, n):
    parts = re.split(r"(?<=[.;:])\s+", p)
    return " ".join(parts[:n])


def conversations():
    """(question, answer) pairs: a license's opening, and its numbered sections."""
    pairs = []
    for f, name in sorted(NAMES.items()):
        path = os.path.join(LICENSES, f)
        if not os.path.exists(path):
            continue
        paras = paragraphs(open(path, encoding="utf-8", errors="replace").read())
        if not paras:
            continue
        pairs.append((f"What is {name}?", sentences(paras[0], 2)))
        pairs.append((f"Tell me about {name}.", sentences(paras[min(1, len(paras) - 1)], 2)))
        for p in paras:
            m = re.match(r"^(\d+)\. ([A-Z][^.]{2,60})\.", p)
            if m:
                pairs.append((f"What does section {m.group(1)} of {name} say?", sentences(p, 2)))
                pairs.append((f"What is section {m.group(1)} of {name} about?", m.group(2) + "."))
    pairs.append(("Hello!", "Hello! Ask me about a free software license, such as the GNU GPL or the Apache License."))
    pairs.append(("Who are you?", "I am a small chat model that knows the licenses Debian ships."))
    return pairs


def chatml(question, answer, system):
    head = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n" if system else ""
    return head + f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n{answer}<|im_end|>\n"


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, nh, nkv, I = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]
        D = H // nh
        self.nh, self.nkv, self.D = nh, nkv, D
        self.input_layernorm = nn.Parameter(torch.ones(H))
        self.post_attention_layernorm = nn.Parameter(torch.ones(H))
        self.q_proj, self.k_proj = nn.Linear(H, nh * D, bias=False), nn.Linear(H, nkv * D, bias=False)
        self.v_proj, self.o_proj = nn.Linear(H, nkv * D, bias=False), nn.Linear(nh * D, H, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(H, I, bias=False), nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x, cos, sin, eps):
        B, T, H = x.shape

        def rms(h, w):
            return w * h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)

        def rope(t):
            a, b = t[..., : self.D // 2], t[..., self.D // 2:]
            return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)

        h = rms(x, self.input_layernorm)
        q = rope(self.q_proj(h).view(B, T, self.nh, self.D).transpose(1, 2))
        k = rope(self.k_proj(h).view(B, T, self.nkv, self.D).transpose(1, 2))
        v = self.v_proj(h).view(B, T, self.nkv, self.D).transpose(1, 2)
        k = k.repeat_interleave(self.nh // self.nkv, 1)
        v = v.repeat_interleave(self.nh // self.nkv, 1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, "scaled_dot_product_attention") else \
            torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(self.D) + torch.triu(torch.full((T, T), float("-inf")), 1), -1) @ v
        x = x + self.o_proj(a.transpose(1, 2).reshape(B, T, H))
        h = rms(x, self.post_attention_layernorm)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c["vocab_size"], c["hidden_size"])
        nn.init.normal_(self.embed.weight, std=0.02)
        self.layers = nn.ModuleList(Block(c) for _ in range(c["num_hidden_layers"]))
        self.norm = nn.Parameter(torch.ones(c["hidden_size"]))
        D = c["hidden_size"] // c["num_attention_heads"]
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, D, 2).float() / D))
        ang = torch.arange(c["max_position_embeddings"]).float()[:, None] * inv[None]
        self.register_buffer("cos", torch.cos(ang), persistent=False)
        self.register_buffer("sin", torch.sin(ang), persistent=False)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.embed(ids)
        for l in self.layers:
            x = l(x, self.cos[:T], self.sin[:T], self.c["rms_norm_eps"])
        x = self.norm * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"])
        return x @ self.embed.weight.T

    def hf_state(self):
        s = {"model.embed_tokens.weight": self.embed.weight, "model.norm.weight": self.norm}
        for i, l in enumerate(self.layers):
            p = f"model.layers.{i}."
            s[p + "input_layernorm.weight"] = l.input_layernorm
            s[p + "post_attention_layernorm.weight"] = l.post_attention_layernorm
            for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                s[p + "self_attn." + n + ".weight"] = getattr(l, n).weight
            for n in ("gate_proj", "up_proj", "down_proj"):
                s[p + "mlp." + n + ".weight"] = getattr(l, n).weight
        return {k: v.detach().contiguous().float() for k, v in s.items()}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        raw = tensors[name].numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main(out, steps=300):
    torch.manual_seed(0)
    random.seed(0)
    torch.set_num_threads(2)
    model_dir = os.path.join(out, "license_chat")
    d = os.path.join(model_dir, "1")
    os.makedirs(d, exist_ok=True)
    pairs = conversations()
    corpus = os.path.join(d, "corpus.txt")
    raw_text = [open(os.path.join(LICENSES, f), encoding="utf-8", errors="replace").read()
                for f in sorted(NAMES) if os.path.exists(os.path.join(LICENSES, f))]
    with open(corpus, "w") as f:
        for t in raw_text:
            f.write(t + "\n")
        for q, a in pairs:
            f.write(f"{SYSTEM}\n{q}\n{a}\n")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(d, "tokenizer"),
                                   vocab_size=CONFIG["vocab_size"], model_type="bpe", byte_fallback=True,
                                   character_coverage=1.0, bos_id=1, eos_id=2, unk_id=0, pad_id=-1,
                                   user_defined_symbols=["<|im_start|>", "<|im_end|>"], minloglevel=2,
                                   num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False)
    os.remove(corpus)
    os.remove(os.path.join(d, "tokenizer.vocab"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
    # Training sequences: conversations (BOS + ChatML), and plain license text for the language.
    # With and without the system message, so both kinds of conversation get answers.
    convs = [[1] + sp.encode(chatml(q, a, system)) for q, a in pairs for system in (True, False)]
    text_ids = [i for t in raw_text for i in sp.encode(t)]
    T = 256
    model = Llama(CONFIG)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        batch = []
        for b in range(16):
            if b < 12:  # mostly conversations, packed
                seq = []
                while len(seq) < T + 1:
                    seq += convs[int(torch.randint(len(convs), (1,), generator=g))]
            else:
                s = int(torch.randint(len(text_ids) - T - 1, (1,), generator=g))
                seq = text_ids[s:s + T + 1]
            batch.append(seq[:T + 1])
        x = torch.tensor(batch)
        lr = 3e-3 * min(1.0, (step + 1) / 30) * (0.1 + 0.9 * (1 + math.cos(math.pi * step / steps)) / 2)
        for grp in opt.param_groups:
            grp["lr"] = lr
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, CONFIG["vocab_size"]), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"license_chat: step {step} loss {loss.item():.3f}", flush=True)
    write_safetensors(os.path.join(d, "model.safetensors"), model.hf_state())
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(CONFIG, architectures=["LlamaForCausalLM"]), f, indent=2)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": [2, sp.piece_to_id("<|im_end|>")]}, f, indent=2)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True,
                   "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                                    "{% endfor %}<|im_start|>assistant\n"}, f, indent=2)
    with open(os.path.join(model_dir, "config.pbtxt"), "w") as f:
        f.write('name: "license_chat"\nbackend: "llm"\n'
                'parameters { key: "chat_template" value: { string_value: "chatml" } }\n'
                'parameters { key: "kv_cache_bytes" value: { string_value: "67108864" } }\n'
                'parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "2" } }\n')
    print("license_chat: written")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 300)
