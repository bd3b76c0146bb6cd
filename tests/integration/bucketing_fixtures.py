"""Fixtures for sequence bucketing (docs/batching.md): a BERT-style encoder with
a sequence output and a [CLS] head, as TorchScript and as ONNX, each served
with its token ids padded in buckets and its mask filled in by the server.

  bucket_encoder_ts    TorchScript, batching.pad_inputs tokens, mask_input mask, buckets 16,32,64,128
  bucket_encoder_onnx  the same module exported to ONNX (opset 17, dynamic batch and length)
  bucket_encoder_adaptive  the TorchScript file with batching.mode adaptive as well
  ragged_sum           Triton's ragged batching: x (allow_ragged_batch) arrives as the batch's elements in one 1-D
                       tensor with the batch input offsets (BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO); answers each
                       request's sum and length
"""
import os

import torch
import torch.nn as nn

MAX_LEN = 128


class SeqEncoder(nn.Module):
    """Token + position embeddings, post-norm encoder layers with a padding mask; every position's hidden
    state and a [CLS] classifier."""

    def __init__(self, vocab=100, hidden=32, ff=64, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.pos = nn.Parameter(torch.randn(MAX_LEN, hidden) * 0.1)
        layer = nn.TransformerEncoderLayer(hidden, 4, dim_feedforward=ff, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(hidden, 2)

    def forward(self, tokens, mask):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        x = self.encoder(x, src_key_padding_mask=mask == 0)
        return x, self.head(x[:, 0])


class ClsEncoder(SeqEncoder):
    """Only the [CLS] classifier (the batching benchmark's text model)."""

    def forward(self, tokens, mask):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        x = self.encoder(x, src_key_padding_mask=mask == 0)
        return self.head(x[:, 0])


class RaggedSum(nn.Module):
    def forward(self, x, offsets):
        n = offsets.shape[0] - 1
        out = torch.zeros(n, 2)
        for i in range(n):
            part = x[offsets[i]:offsets[i + 1]]
            out[i, 0] = part.sum()
            out[i, 1] = part.shape[0]
        return out


RAGGED_CONFIG = """platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "offsets" data_type: TYPE_INT64
                source_input: "x" } ]
output [ { name: "sum_and_length" data_type: TYPE_FP32 dims: [ 2 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
"""


def module():
    torch.manual_seed(18)
    return SeqEncoder().eval()


def config(platform, adaptive=False):
    extra = ""
    if adaptive:
        extra = 'parameters { key: "batching.mode" value: { string_value: "adaptive" } }\n'
    return """platform: "%s"
max_batch_size: 8
input [ { name: "tokens" data_type: TYPE_INT64 dims: [ -1 ] },
        { name: "mask" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "hidden" data_type: TYPE_FP32 dims: [ -1, 32 ] },
         { name: "logits" data_type: TYPE_FP32 dims: [ 2 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
parameters { key: "batching.pad_inputs" value: { string_value: "tokens:0" } }
parameters { key: "batching.mask_input" value: { string_value: "mask" } }
parameters { key: "batching.buckets" value: { string_value: "16,32,64,128" } }
%s""" % (platform, extra)


def make(repo):
    m = module()
    example = (torch.zeros(2, 7, dtype=torch.long), torch.ones(2, 7, dtype=torch.long))
    for name, platform, adaptive in (("bucket_encoder_ts", "pytorch_libtorch", False),
                                     ("bucket_encoder_adaptive", "pytorch_libtorch", True)):
        d = os.path.join(repo, name, "1")
        os.makedirs(d, exist_ok=True)
        torch.jit.script(m).save(os.path.join(d, "model.pt"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config(platform, adaptive))
    d = os.path.join(repo, "bucket_encoder_onnx", "1")
    os.makedirs(d, exist_ok=True)
    axes = {"tokens": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}, "hidden": {0: "batch", 1: "seq"},
            "logits": {0: "batch"}}
    torch.onnx.export(m, example, os.path.join(d, "model.onnx"), opset_version=17, input_names=["tokens", "mask"],
                      output_names=["hidden", "logits"], dynamic_axes=axes)
    with open(os.path.join(repo, "bucket_encoder_onnx", "config.pbtxt"), "w") as f:
        f.write(config("onnxruntime_onnx"))
    d = os.path.join(repo, "ragged_sum", "1")
    os.makedirs(d, exist_ok=True)
    torch.jit.script(RaggedSum()).save(os.path.join(d, "model.pt"))
    with open(os.path.join(repo, "ragged_sum", "config.pbtxt"), "w") as f:
        f.write(RAGGED_CONFIG)
