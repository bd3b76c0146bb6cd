#!/usr/bin/python3
"""Builds the integration-test model repository (deterministic, seeds fixed).

Besides the example models (scripts/make_examples.py), it holds fixtures that
exercise one feature each: every datatype, tuple/dict outputs, positional
inputs, auto-completed configs, reshape, BYTES through the identity backend,
a slow model for queue and shutdown tests, a model that runs as long as the
request asks (cancellation and concurrency tests), XGBoost and FIL models
(tree_fixtures.py), ONNX models exported by torch.onnx (onnx_fixtures.py), and a broken config.
"""
import os
import shutil
import subprocess
import sys

import torch
import torch.nn as nn

import bucketing_fixtures
import ensemble_fixtures
import llm_fixtures
import onnx_fixtures
import python_fixtures
import quant_fixtures
import tree_fixtures

torch.set_num_threads(1)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def save(module, repo, name, version=1):
    d = os.path.join(repo, name, str(version))
    os.makedirs(d, exist_ok=True)
    torch.jit.script(module).save(os.path.join(d, "model.pt"))


class Scale(nn.Module):
    """Version k of a lifecycle model answers x * k, so every answer names its version."""

    def __init__(self, k: float):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor):
        return self.net(x)


class DTypes(nn.Module):
    def forward(self, b: torch.Tensor, i8: torch.Tensor, u8: torch.Tensor, i16: torch.Tensor, i32: torch.Tensor,
                i64: torch.Tensor, f16: torch.Tensor, f64: torch.Tensor):
        return {
            "b_out": torch.logical_not(b),
            "i8_out": i8 * 2,
            "u8_out": u8 + 1,
            "i16_out": i16 - 7,
            "i32_out": i32 * 3,
            "i64_out": i64 + 1000000000000,
            "f16_out": f16 * 2,
            "f64_out": f64 / 3,
        }


class MultiIO(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor):
        return a + b, a * b


class Triple(nn.Module):
    def forward(self, x: torch.Tensor):
        return x * 3


class TripleAndCount(nn.Module):
    """Returns a tuple: x * 3 and, as INT64, how many elements are positive (auto-completed outputs)."""

    def forward(self, x: torch.Tensor):
        return x * 3, (x > 0).sum().reshape(1)


class RowSum(nn.Module):
    def forward(self, x: torch.Tensor):
        return x.sum(dim=2)  # [B,4,4] -> [B,4]


class Slow(nn.Module):
    def forward(self, x: torch.Tensor):
        # ~100 ms of work on one core: long enough that concurrent requests overlap.
        m = torch.ones(256, 256) / 256.0
        y = x.repeat(8, 1)
        for _ in range(1000):
            y = torch.tanh(y @ m)
        return y[:1]


class Fail(nn.Module):
    """Fails at run time: [n, 4] @ [3, 5]."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3, 5), requires_grad=False)

    def forward(self, x: torch.Tensor):
        return torch.mm(x, self.w)


class Wrap(nn.Module):
    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor):
        # Each level adds a frame (with these lines) to TorchScript's traceback,
        # so the message is long and the actual error sits at its end.
        y = x * 1.0
        return self.inner(y)


def main(repo, root):
    if os.path.exists(repo):
        shutil.rmtree(repo)
    # The control state (labels) servers keep for this repository (inferd_client.state_dir).
    shutil.rmtree(os.path.abspath(repo).rstrip("/") + ".state", ignore_errors=True)
    os.makedirs(repo)
    subprocess.check_call([sys.executable, os.path.join(root, "scripts", "make_examples.py"), repo, "--skip-chat"],
                          stdout=subprocess.DEVNULL)

    torch.manual_seed(1)
    mlp = Mlp().eval()
    save(mlp, repo, "mlp")
    write(os.path.join(repo, "mlp", "config.pbtxt"), """platform: "pytorch_libtorch"
max_batch_size: 16
input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ]
dynamic_batching { max_queue_delay_microseconds: 2000 }
""")
    # The same MLP with labels for its outputs (Triton's classification extension).
    save(mlp, repo, "mlp_labels")
    write(os.path.join(repo, "mlp_labels", "config.pbtxt"), """platform: "pytorch_libtorch"
max_batch_size: 16
input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "labels.txt" } ]
parameters { key: "rule:label" value: { string_value: "y | softmax | argmax | threshold 0.6 others | label" } }
parameters { key: "rule:confidence" value: { string_value: "y | softmax | argmax | score" } }
parameters { key: "rule:probabilities" value: { string_value: "y | softmax" } }
parameters { key: "rule:top2" value: { string_value: "y | top_k 2 | label | map cat=pet dog=pet" } }
""")
    write(os.path.join(repo, "mlp_labels", "labels.txt"), "cat\ndog\nbird\n")
    save(mlp, repo, "mlp_nobatch")
    write(os.path.join(repo, "mlp_nobatch", "config.pbtxt"), """platform: "pytorch_libtorch"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 8 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]
parameters { key: "OPTIMIZE_FOR_INFERENCE" value: { string_value: "false" } }
""")

    save(DTypes(), repo, "dtypes")
    pairs = [("b", "BOOL"), ("i8", "INT8"), ("u8", "UINT8"), ("i16", "INT16"), ("i32", "INT32"), ("i64", "INT64"),
             ("f16", "FP16"), ("f64", "FP64")]
    ins = ", ".join('{ name: "%s" data_type: TYPE_%s dims: [ 3 ] }' % (n, t) for n, t in pairs)
    outs = ", ".join('{ name: "%s_out" data_type: TYPE_%s dims: [ 3 ] }' % (n, t) for n, t in pairs)
    write(os.path.join(repo, "dtypes", "config.pbtxt"),
          "backend: \"pytorch\"\nmax_batch_size: 4\ninput [ %s ]\noutput [ %s ]\n" % (ins, outs))

    save(MultiIO(), repo, "multi_io")
    write(os.path.join(repo, "multi_io", "config.pbtxt"), """platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }
""")

    save(Triple(), repo, "auto")  # no config.pbtxt: auto-completed
    save(TripleAndCount(), repo, "auto_pair")  # no config.pbtxt: two auto-completed outputs

    save(RowSum(), repo, "reshape")
    write(os.path.join(repo, "reshape", "config.pbtxt"), """platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] reshape { shape: [ 4, 4 ] } } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")

    write(os.path.join(repo, "echo_bytes", "config.pbtxt"), """backend: "identity"
max_batch_size: 0
input [ { name: "text" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "text_out" data_type: TYPE_STRING dims: [ -1 ] } ]
""")
    os.makedirs(os.path.join(repo, "echo_bytes", "1"))

    save(Slow(), repo, "slow")
    write(os.path.join(repo, "slow", "config.pbtxt"), """platform: "pytorch_libtorch"
max_batch_size: 1
input [ { name: "x" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 256 ] } ]
dynamic_batching { default_queue_policy { max_queue_size: 1 } }
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
""")

    # A model whose executions wait until the test opens its gate (the gate backend): a request that keeps the
    # model busy exactly as long as a test needs, while the requests behind it wait in the queue.
    os.makedirs(os.path.join(repo, "held", "1"), exist_ok=True)
    write(os.path.join(repo, "held", "config.pbtxt"), """backend: "gate"
max_batch_size: 2048
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { default_queue_policy { max_queue_size: 4096 } }
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters { key: "max_hold_ms" value: { string_value: "120000" } }
""")
    os.makedirs(os.path.join(repo, "held_ctl", "1"), exist_ok=True)
    write(os.path.join(repo, "held_ctl", "config.pbtxt"), """backend: "gate"
max_batch_size: 0
input [ { name: "open" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "waiting" data_type: TYPE_INT32 dims: [ 1 ] } ]
parameters { key: "role" value: { string_value: "control" } }
parameters { key: "gate" value: { string_value: "held" } }
""")

    deep = Fail()
    for _ in range(10):
        deep = Wrap(deep)
    save(deep, repo, "raises")
    # Optimised at load (a small module would wait until it proves hot): the failed check falls back to the plain one.
    write(os.path.join(repo, "raises", "config.pbtxt"), """platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 5 ] } ]
parameters { key: "OPTIMIZE_FOR_INFERENCE" value: { string_value: "true" } }
""")

    tree_fixtures.make(repo)
    onnx_fixtures.make(repo)
    ensemble_fixtures.make(repo)
    python_fixtures.make(repo)
    llm_fixtures.make(repo)
    bucketing_fixtures.make(repo)
    quant_fixtures.make(repo)

    save(Triple(), repo, "broken")
    write(os.path.join(repo, "broken", "config.pbtxt"), "platform: \"pytorch_libtorch\"\nmax_batch_sise: 4\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
