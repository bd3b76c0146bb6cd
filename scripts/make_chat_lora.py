#!/usr/bin/python3
"""Trains a LoRA adapter for the example model license_chat (scripts/make_chat_model.py), in a minute on CPU, and
saves it in PEFT's format (adapter_config.json + adapter_model.safetensors) where inferd finds it:
REPO/license_chat/loras/license_files/. The adapter answers "What is <license>?" with where Debian keeps the
license's text (the base model answers with the license's opening lines): the same question, another answer, which
shows the adapter at work. Rank 8 on every projection (q, k, v, o, gate, up, down), lora_alpha 16; the base weights
stay frozen.

Usage: /usr/bin/python3 scripts/make_chat_lora.py REPO [STEPS]"""
import json
import math
import os
import sys

import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src", "backends", "llm", "testdata"))
import make_chat_model as base  # noqa: E402
from reference import read_safetensors  # noqa: E402  (the safetensors reader the tests use)

RANK, ALPHA = 8, 16
MODULES = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
           "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


class LoraLinear(nn.Module):
    """A frozen nn.Linear plus scale * B A (PEFT's LoRA: A random, B zero at the start)."""

    def __init__(self, linear):
        super().__init__()
        self.base = linear
        self.base.weight.requires_grad_(False)
        self.A = nn.Parameter(torch.randn(RANK, linear.in_features) / math.sqrt(linear.in_features))
        self.B = nn.Parameter(torch.zeros(linear.out_features, RANK))

    def forward(self, x):
        return self.base(x) + (ALPHA / RANK) * (x @ self.A.T) @ self.B.T


def main(repo, steps=150):
    torch.manual_seed(0)
    torch.set_num_threads(2)
    d = os.path.join(repo, "license_chat", "1")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
    model = base.Llama(base.CONFIG)
    w = read_safetensors(os.path.join(d, "model.safetensors"))
    with torch.no_grad():
        model.embed.weight.copy_(w["model.embed_tokens.weight"])
        model.norm.copy_(w["model.norm.weight"])
        for i, layer in enumerate(model.layers):
            p = f"model.layers.{i}."
            layer.input_layernorm.copy_(w[p + "input_layernorm.weight"])
            layer.post_attention_layernorm.copy_(w[p + "post_attention_layernorm.weight"])
            for m, parent in MODULES.items():
                getattr(layer, m).weight.copy_(w[f"{p}{parent}.{m}.weight"])
    for prm in model.parameters():
        prm.requires_grad_(False)
    for layer in model.layers:
        for m in MODULES:
            setattr(layer, m, LoraLinear(getattr(layer, m)))
    pairs = []
    for f, name in sorted(base.NAMES.items()):
        path = os.path.join(base.LICENSES, f)
        if os.path.exists(path):
            answer = f"Debian ships {name} in {path}."
            pairs += [(f"What is {name}?", answer), (f"Where is {name}?", answer)]
    convs = [[1] + sp.encode(base.chatml(q, a, system)) for q, a in pairs for system in (True, False)]
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=5e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(0)
    T = 128
    for step in range(steps):
        batch = []
        for _ in range(8):
            seq = []
            while len(seq) < T + 1:
                seq += convs[int(torch.randint(len(convs), (1,), generator=g))]
            batch.append(seq[:T + 1])
        x = torch.tensor(batch)
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, base.CONFIG["vocab_size"]), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"license_files: step {step} loss {loss.item():.3f}", flush=True)
    out = os.path.join(repo, "license_chat", "loras", "license_files")
    os.makedirs(out, exist_ok=True)
    tensors = {}
    for i, layer in enumerate(model.layers):
        for m, parent in MODULES.items():
            lin = getattr(layer, m)
            p = f"base_model.model.model.layers.{i}.{parent}.{m}."
            tensors[p + "lora_A.weight"] = lin.A.detach().contiguous()
            tensors[p + "lora_B.weight"] = lin.B.detach().contiguous()
    base.write_safetensors(os.path.join(out, "adapter_model.safetensors"), tensors)
    with open(os.path.join(out, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": RANK, "lora_alpha": ALPHA,
                   "target_modules": list(MODULES), "lora_dropout": 0.0, "bias": "none", "use_rslora": False,
                   "base_model_name_or_path": "license_chat"}, f, indent=2)
    print("license_files: written to", out)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 150)
