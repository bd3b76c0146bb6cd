"""ONNX fixtures of the integration repository (make_fixtures.py calls
make()): models exported here with python3-torch's torch.onnx.export
(dynamic batch axis); the tests compare the server's answers with PyTorch
running the same module.

  onnx_mlp      opset 13, no config.pbtxt: backend found by model.onnx, batch axis auto-completed
  onnx_cnn      opset 17, Conv + BatchNorm + ReLU + MaxPool + GlobalAveragePool + Gemm, config with
                dynamic batching (preferred 8, long delay: requests merge)
  onnx_lstm     opset 13, embedding + 2-layer LSTM text classifier (INT64 token ids, dynamic batch and length)
  onnx_gru      opset 17, the same with a GRU
  onnx_bigru    opset 17, a bidirectional 1-layer GRU (exported without `activations`: the defaults, both ways)
  onnx_encoder  opset 17, BERT-style transformer encoder (attention padding mask, GELU, LayerNormalization)
  onnx_resnet18 opset 13, the standard ResNet-18 (scripts/make_examples.py) on 64x64 images
  onnx_<name>_o13 / _o17  the same modules at the other opset (every real model at 13 and 17)
  onnx_external the MLP with its weights in an external data file beside model.onnx
  onnx_dtypes   one graph over FP16, FP64, BOOL, UINT8, INT8 and BYTES inputs (no config: auto-completed)
  onnx_corrupt  a truncated model.onnx: fails to load, the rest serve
  onnx_escape   external data whose location leaves the version folder ("../secret.bin")
  onnx_cycle    two nodes reading each other's outputs (a cycle)
  onnx_missing  a node reading a name no initializer, input or node provides
  onnx_unsupported  an operator the executor lacks (NonMaxSuppression)
"""
import os
import sys

import onnx
import onnx.helper as oh
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from make_examples import ResNet18  # noqa: E402


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 3), nn.Softmax(dim=-1))

    def forward(self, x):
        return self.net(x)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 5)

    def forward(self, image):
        return self.head(torch.flatten(self.features(image), 1))


class TextClassifier(nn.Module):
    """Token ids -> embedding -> LSTM or GRU (2 layers, batch first) -> the last step's state -> 4 classes."""

    def __init__(self, cell, bidirectional=False):
        super().__init__()
        self.embed = nn.Embedding(50, 12)
        layers = 1 if bidirectional else 2
        self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(12, 16, num_layers=layers, batch_first=True,
                                                            bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, 4)

    def forward(self, tokens):
        out, _ = self.rnn(self.embed(tokens))
        return self.head(out[:, -1, :])


class Encoder(nn.Module):
    """BERT-style: token + position embeddings, 2 post-norm encoder layers (GELU) with a padding mask, [CLS]."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(60, 32)
        self.pos = nn.Parameter(torch.randn(16, 32) * 0.1)
        layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 2)

    def forward(self, tokens, mask):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        x = self.encoder(x, src_key_padding_mask=mask == 0)
        return self.head(x[:, 0])


def _export(module, example, path, opset, in_name, out_name):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(module, example, path, opset_version=opset, input_names=[in_name], output_names=[out_name],
                      dynamic_axes={in_name: {0: "batch"}, out_name: {0: "batch"}})


def text_modules():
    torch.manual_seed(4)
    return TextClassifier("lstm").eval(), TextClassifier("gru").eval(), Encoder().eval()


def bigru():
    torch.manual_seed(7)
    return TextClassifier("gru", bidirectional=True).eval()


def modules():
    torch.manual_seed(3)
    mlp = Mlp().eval()
    cnn = Cnn().eval()
    with torch.no_grad():  # non-trivial batch-norm statistics
        cnn.features[1].running_mean.uniform_(-0.5, 0.5)
        cnn.features[1].running_var.uniform_(0.5, 2.0)
    return mlp, cnn


def resnet18():
    torch.manual_seed(6)
    net = ResNet18(classes=10).eval()
    with torch.no_grad():  # non-trivial batch-norm statistics, folded into the convolutions by the export
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
    return net


# (model name, module, example input, opset, input name, output name); text models take dynamic lengths.
def exports():
    mlp, cnn = modules()
    lstm, gru, enc = text_modules()
    tokens = torch.zeros(2, 7, dtype=torch.long)
    return [("onnx_mlp", mlp, torch.zeros(2, 8), 13, "x", "probs"),
            ("onnx_cnn", cnn, torch.zeros(2, 3, 16, 16), 17, "image", "logits"),
            ("onnx_lstm", lstm, tokens, 13, "tokens", "logits"),
            ("onnx_gru", gru, tokens, 17, "tokens", "logits"),
            ("onnx_bigru", bigru(), tokens, 17, "tokens", "logits"),
            ("onnx_encoder", enc, (tokens, torch.ones(2, 7, dtype=torch.long)), 17, ["tokens", "mask"], "logits"),
            ("onnx_resnet18", resnet18(), torch.zeros(2, 3, 64, 64), 13, "image", "logits")]


def other_opset(name, opset):
    return name + ("_o17" if opset == 13 else "_o13")


def _export_any(module, example, path, opset, in_names, out_name):
    in_names = in_names if isinstance(in_names, list) else [in_names]
    axes = {n: ({0: "batch", 1: "seq"} if example_is_text(module) else {0: "batch"}) for n in in_names}
    axes[out_name] = {0: "batch"}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(module, example, path, opset_version=opset, input_names=in_names, output_names=[out_name],
                      dynamic_axes=axes)


def example_is_text(module):
    return isinstance(module, (TextClassifier, Encoder))


def _write_graph(repo, name, nodes, inits=(), opset=13):
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 4])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 4])
    graph = oh.make_graph(nodes, name, [x], [y], initializer=list(inits))
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    with open(os.path.join(repo, name, "1", "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())  # unchecked: these are meant to be wrong


def make_dtypes(repo):
    """h*2 (FP16), d+1 (FP64), not b (BOOL), u+1 (UINT8), -i (INT8), s (BYTES) and float(s) (FP32)."""
    T = onnx.TensorProto
    ins = [oh.make_tensor_value_info(n, t, [None, 3]) for n, t in
           (("h", T.FLOAT16), ("d", T.DOUBLE), ("b", T.BOOL), ("u", T.UINT8), ("i", T.INT8), ("s", T.STRING))]
    outs = [oh.make_tensor_value_info(n, t, [None, 3]) for n, t in
            (("h2", T.FLOAT16), ("d1", T.DOUBLE), ("nb", T.BOOL), ("u1", T.UINT8), ("ni", T.INT8), ("s_same", T.STRING),
             ("s_num", T.FLOAT))]
    inits = [oh.make_tensor("two", T.FLOAT16, [], [2.0]), oh.make_tensor("one_d", T.DOUBLE, [], [1.0]),
             oh.make_tensor("one_u", T.UINT8, [], [1])]
    nodes = [oh.make_node("Mul", ["h", "two"], ["h2"]), oh.make_node("Add", ["d", "one_d"], ["d1"]),
             oh.make_node("Not", ["b"], ["nb"]), oh.make_node("Add", ["u", "one_u"], ["u1"]),
             oh.make_node("Neg", ["i"], ["ni"]), oh.make_node("Identity", ["s"], ["s_same"]),
             oh.make_node("Cast", ["s"], ["s_num"], to=T.FLOAT)]
    model = oh.make_model(oh.make_graph(nodes, "dtypes", ins, outs, initializer=inits),
                          opset_imports=[oh.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    os.makedirs(os.path.join(repo, "onnx_dtypes", "1"), exist_ok=True)
    onnx.save(model, os.path.join(repo, "onnx_dtypes", "1", "model.onnx"))


def make_bad(repo, mlp):
    # External data that points outside the version folder.
    path = os.path.join(repo, "onnx_escape", "1", "model.onnx")
    _export(mlp, torch.zeros(2, 8), path, 13, "x", "probs")
    model = onnx.load(path)
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
                    size_threshold=0)
    model = onnx.load(path, load_external_data=False)
    for t in model.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../secret.bin"
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    _write_graph(repo, "onnx_cycle", [oh.make_node("Add", ["x", "b"], ["a"], name="first"),
                                      oh.make_node("Relu", ["a"], ["b"], name="second"),
                                      oh.make_node("Identity", ["b"], ["y"], name="out")])
    _write_graph(repo, "onnx_missing", [oh.make_node("Add", ["x", "weights"], ["y"], name="add_weights")])
    boxes = oh.make_tensor("boxes", onnx.TensorProto.FLOAT, [1, 1, 4], [0, 0, 1, 1])
    _write_graph(repo, "onnx_unsupported", [oh.make_node("NonMaxSuppression", ["boxes", "x"], ["sel"], name="nms"),
                                            oh.make_node("Identity", ["x"], ["y"], name="out")], [boxes])


def make_fill(repo):
    """y = ones(shape): the request decides how much memory the graph asks for (MAX_TENSOR_BYTES)."""
    T = onnx.TensorProto
    node = oh.make_node("ConstantOfShape", ["shape"], ["y"], value=oh.make_tensor("one", T.FLOAT, [1], [1.0]))
    graph = oh.make_graph([node], "fill", [oh.make_tensor_value_info("shape", T.INT64, [2])],
                          [oh.make_tensor_value_info("y", T.FLOAT, ["rows", "cols"])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    for name, limit in (("onnx_fill", None), ("onnx_fill_1mib", "1048576"), ("onnx_fill_bad_limit", "lots")):
        os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
        onnx.save(model, os.path.join(repo, name, "1", "model.onnx"))
        if limit is not None:
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write('parameters { key: "MAX_TENSOR_BYTES" value { string_value: "%s" } }\n' % limit)


def make(repo):
    for name, module, example, opset, in_name, out_name in exports():
        for model, op in ((name, opset), (other_opset(name, opset), 13 if opset == 17 else 17)):
            if model in ("onnx_mlp", "onnx_cnn", "onnx_lstm", "onnx_gru", "onnx_encoder"):
                continue  # written below, with their configs
            _export_any(module, example, os.path.join(repo, model, "1", "model.onnx"), op, in_name, out_name)
    mlp, cnn = modules()
    # The MLP with its weights in one external data file.
    path = os.path.join(repo, "onnx_external", "1", "model.onnx")
    _export(mlp, torch.zeros(2, 8), path, 13, "x", "probs")
    onnx.save_model(onnx.load(path), path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    make_bad(repo, mlp)
    make_dtypes(repo)
    make_fill(repo)
    _export(mlp, torch.zeros(2, 8), os.path.join(repo, "onnx_mlp", "1", "model.onnx"), 13, "x", "probs")
    _export(cnn, torch.zeros(2, 3, 16, 16), os.path.join(repo, "onnx_cnn", "1", "model.onnx"), 17, "image", "logits")
    with open(os.path.join(repo, "onnx_cnn", "config.pbtxt"), "w") as f:
        f.write("""platform: "onnxruntime_onnx"
max_batch_size: 16
input [ { name: "image" data_type: TYPE_FP32 dims: [ 3, 16, 16 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 5 ] } ]
dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 30000000 }
""")
    lstm, gru, enc = text_modules()
    tokens = torch.zeros(2, 7, dtype=torch.long)
    for name, m, opset in (("onnx_lstm", lstm, 13), ("onnx_gru", gru, 17)):
        path = os.path.join(repo, name, "1", "model.onnx")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.onnx.export(m, tokens, path, opset_version=opset, input_names=["tokens"], output_names=["logits"],
                          dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "logits": {0: "batch"}})
    path = os.path.join(repo, "onnx_encoder", "1", "model.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(enc, (tokens, torch.ones(2, 7, dtype=torch.long)), path, opset_version=17,
                      input_names=["tokens", "mask"], output_names=["logits"],
                      dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"},
                                    "logits": {0: "batch"}})
    path = os.path.join(repo, "onnx_corrupt", "1", "model.onnx")
    _export(mlp, torch.zeros(2, 8), path, 13, "x", "probs")
    raw = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(raw[:len(raw) // 2])
