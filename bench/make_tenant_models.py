#!/usr/bin/python3
"""Writes N small distinct TorchScript models into a Triton-layout repository:
per-tenant classifiers `tenant_00000` ... each `Linear(8, 4)` whose weights are
seeded by the tenant number (so every model answers differently), one version,
a config.pbtxt. Used by the many-models benchmark and the residency tests.

Usage: make_tenant_models.py REPO N [--hidden H] [--prefix tenant_]
With --hidden H > 0 the model is Linear(8,H)-ReLU-Linear(H,4) (bigger models).
"""
import argparse
import os

import torch
import torch.nn as nn

torch.set_num_threads(1)

CONFIG = """platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
"""


class Small(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 4)) if hidden else nn.Linear(8, 4)

    def forward(self, x: torch.Tensor):
        return self.net(x)


def model_name(prefix, i):
    return "%s%05d" % (prefix, i)


def tenant_weights(module, i):
    """Deterministic weights for tenant i (the tests recompute them)."""
    g = torch.Generator().manual_seed(1000 + i)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("n", type=int)
    ap.add_argument("--hidden", type=int, default=0)
    ap.add_argument("--prefix", default="tenant_")
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    scripted = torch.jit.script(Small(args.hidden).eval())
    for i in range(args.start, args.start + args.n):
        d = os.path.join(args.repo, model_name(args.prefix, i))
        os.makedirs(os.path.join(d, "1"), exist_ok=True)
        tenant_weights(scripted, i)
        scripted.save(os.path.join(d, "1", "model.pt"))
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write(CONFIG)


if __name__ == "__main__":
    main()
