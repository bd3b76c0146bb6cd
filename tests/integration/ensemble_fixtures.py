"""Ensembles of the integration repository (Triton's ensemble_scheduling), valid and invalid."""
import os

import torch
from torch import nn


class Scale2(nn.Module):
    def forward(self, x: torch.Tensor):
        return x * 2


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _ensemble(repo, name, steps, inputs, outputs, max_batch_size=16, extra=""):
    """steps: [(model, version, {model_input: tensor}, {model_output: tensor})]."""
    text = ['name: "%s"' % name, 'platform: "ensemble"', "max_batch_size: %d" % max_batch_size,
            "input [ %s ]" % ", ".join(inputs), "output [ %s ]" % ", ".join(outputs), "ensemble_scheduling {"]
    for model, version, ins, outs in steps:
        text.append('  step [ { model_name: "%s" model_version: %d' % (model, version))
        text += ['    input_map { key: "%s" value: "%s" }' % kv for kv in ins.items()]
        text += ['    output_map { key: "%s" value: "%s" }' % kv for kv in outs.items()]
        text.append("  } ]")
    text.append("}")
    _write(os.path.join(repo, name, "config.pbtxt"), "\n".join(text) + "\n" + extra)
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)  # an ensemble's version folder is empty


def t(name, dims, dtype="TYPE_FP32", extra=""):
    return '{ name: "%s" data_type: %s dims: [ %s ] %s}' % (name, dtype, ", ".join(map(str, dims)), extra)


def make(repo):
    os.makedirs(os.path.join(repo, "scale2", "1"), exist_ok=True)
    torch.jit.script(Scale2()).save(os.path.join(repo, "scale2", "1", "model.pt"))
    _write(os.path.join(repo, "scale2", "config.pbtxt"), """platform: "pytorch_libtorch"
max_batch_size: 16
input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 8 ] } ]
dynamic_batching { }
""")
    # raw -> scale2 -> scaled -> mlp -> logits (labelled: classification works on ensemble outputs too).
    _ensemble(repo, "pipe_chain", [("scale2", -1, {"x": "raw"}, {"y": "scaled"}),
                                   ("mlp", -1, {"x": "scaled"}, {"y": "logits"})],
              [t("raw", [8])], [t("logits", [3], extra='label_filename: "labels.txt" ')])
    _write(os.path.join(repo, "pipe_chain", "labels.txt"), "cat\ndog\nbird\n")
    # Two branches from one input: raw -> mlp -> direct; raw -> scale2 -> doubled -> mlp (version 1) -> via_scale.
    _ensemble(repo, "pipe_branches", [("mlp", -1, {"x": "raw"}, {"y": "direct"}),
                                      ("scale2", 1, {"x": "raw"}, {"y": "doubled"}),
                                      ("mlp", 1, {"x": "doubled"}, {"y": "via_scale"})],
              [t("raw", [8])], [t("direct", [3]), t("via_scale", [3]), t("doubled", [8])])
    # Invalid ensembles: each fails its load with the reason in the index.
    _ensemble(repo, "bad_ens_unknown", [("no_such_model", -1, {"x": "raw"}, {"y": "out"})],
              [t("raw", [8])], [t("out", [8])])
    _ensemble(repo, "bad_ens_cycle", [("scale2", -1, {"x": "t2"}, {"y": "t1"}),
                                      ("scale2", -1, {"x": "t1"}, {"y": "t2"})],
              [t("raw", [8])], [t("t1", [8])])
    _ensemble(repo, "bad_ens_twice", [("scale2", -1, {"x": "raw"}, {"y": "out"}),
                                      ("mlp", -1, {"x": "raw"}, {"y": "out"})],
              [t("raw", [8])], [t("out", [8])])
    _ensemble(repo, "bad_ens_never", [("scale2", -1, {"x": "ghost"}, {"y": "out"})],
              [t("raw", [8])], [t("out", [8])])
    _ensemble(repo, "bad_ens_dtype", [("mlp", -1, {"x": "ids"}, {"y": "out"})],
              [t("ids", [8], "TYPE_INT64")], [t("out", [3])])
    _ensemble(repo, "bad_ens_shape", [("mlp", -1, {"x": "raw"}, {"y": "out"})],
              [t("raw", [5])], [t("out", [3])])
    # Ensembles that call each other.
    _ensemble(repo, "bad_ens_loop_a", [("bad_ens_loop_b", -1, {"raw": "raw"}, {"out": "out"})],
              [t("raw", [8])], [t("out", [8])])
    _ensemble(repo, "bad_ens_loop_b", [("bad_ens_loop_a", -1, {"raw": "raw"}, {"out": "out"})],
              [t("raw", [8])], [t("out", [8])])
