#!/usr/bin/python3
"""Generates inferd's example model repository, deterministically.

Models (Triton layout):
  digits        TorchScript: an MLP classifier trained on scikit-learn's bundled
                8x8 digits data (the test accuracy is printed and written to
                digits/ACCURACY)
  digits_onnx   ONNX: the same classifier exported by torch.onnx (opset 17), no
                config.pbtxt (auto-completed from the graph)
  digits_both   an ensemble (Triton's ensemble_scheduling): each request runs
                digits and digits_onnx side by side and answers both
  resnet18      TorchScript: a standard ResNet-18 image CNN (random weights,
                fixed seed) with dynamic batching
  tiny_mlp      TorchScript: a 16->32->4 MLP for measuring per-request overhead
  breast_cancer XGBoost: 300 boosted trees on scikit-learn's bundled breast
                cancer data (30 features), answering class probabilities
  breast_cancer_triage  the same trees with output rules in the config: a
                diagnosis label ("uncertain" below 90% confidence) and the
                confidence
  add_sub       Python backend: Triton's add/sub example model (model.py)
  digits_preprocess  Python backend: raw 0..16 grey levels (UINT8) to the
                pixels digits was trained on
  license_chat  generative: a small Llama-architecture chat model trained here on the licenses in
                /usr/share/common-licenses, with a SentencePiece tokenizer (make_chat_model.py)
  digits_pipeline  an ensemble of three steps: digits_preprocess (Python) ->
                digits (TorchScript) -> output rules (the digit, "unsure"
                below 80% confidence, and the confidence)

Usage: /usr/bin/python3 scripts/make_examples.py OUT_DIR [--skip-chat]
  --skip-chat  leaves out license_chat (its training takes minutes; the integration tests use their own
               generative fixtures)
Runs with Debian's python3-torch, python3-onnx, python3-sklearn and python3-xgboost only (no
downloads).
"""
import os
import sys

import torch
import torch.nn as nn

torch.set_num_threads(1)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class DigitsMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, pixels: torch.Tensor):
        return torch.softmax(self.net(pixels), dim=1)


class TinyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, input: torch.Tensor):
        return self.net(input)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + identity)


class ResNet18(nn.Module):
    """The standard ResNet-18 layout (He et al. 2015): 4 stages of 2 basic blocks."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, image):
        x = self.layers(self.stem(image))
        x = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def train_digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    torch.manual_seed(0)
    model = DigitsMLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        perm = torch.randperm(len(xtr), generator=g)
        for i in range(0, len(xtr), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model.net(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    return model, acc


def main(out, skip_chat=False):
    # digits: trained classifier
    model, acc = train_digits()
    os.makedirs(os.path.join(out, "digits", "1"), exist_ok=True)
    torch.jit.script(model).save(os.path.join(out, "digits", "1", "model.pt"))
    write(os.path.join(out, "digits", "ACCURACY"), "test accuracy %.4f on 450 held-out digits\n" % acc)
    write(os.path.join(out, "digits", "labels.txt"), "".join("%d\n" % i for i in range(10)))
    write(os.path.join(out, "digits", "config.pbtxt"), """name: "digits"
platform: "pytorch_libtorch"
max_batch_size: 64
input [ { name: "pixels" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] label_filename: "labels.txt" } ]
dynamic_batching { max_queue_delay_microseconds: 500 }
instance_group [ { count: 1 kind: KIND_CPU } ]
""")
    print("digits: test accuracy %.4f" % acc)

    # digits_onnx: the same trained classifier exported to ONNX (opset 17, dynamic batch axis), no
    # config.pbtxt: the ONNX backend is chosen by model.onnx and the config auto-completed from the graph
    os.makedirs(os.path.join(out, "digits_onnx", "1"), exist_ok=True)
    torch.onnx.export(model, torch.zeros(2, 64), os.path.join(out, "digits_onnx", "1", "model.onnx"), opset_version=17,
                      input_names=["pixels"], output_names=["probabilities"],
                      dynamic_axes={"pixels": {0: "batch"}, "probabilities": {0: "batch"}})
    print("digits_onnx: written")

    # digits_both: an ensemble with two parallel steps over the same pixels (the version folder stays empty)
    os.makedirs(os.path.join(out, "digits_both", "1"), exist_ok=True)
    write(os.path.join(out, "digits_both", "labels.txt"), "".join("%d\n" % i for i in range(10)))
    write(os.path.join(out, "digits_both", "config.pbtxt"), """name: "digits_both"
platform: "ensemble"
max_batch_size: 32
input [ { name: "pixels" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "torchscript" data_type: TYPE_FP32 dims: [ 10 ] label_filename: "labels.txt" },
         { name: "onnx" data_type: TYPE_FP32 dims: [ 10 ] } ]
ensemble_scheduling {
  step [
    { model_name: "digits" model_version: -1
      input_map { key: "pixels" value: "pixels" }
      output_map { key: "probabilities" value: "torchscript" } },
    { model_name: "digits_onnx" model_version: -1
      input_map { key: "pixels" value: "pixels" }
      output_map { key: "probabilities" value: "onnx" } }
  ]
}
""")
    print("digits_both: written")

    write_python_examples(out)

    # resnet18: standard CNN, random weights
    torch.manual_seed(0)
    net = ResNet18().eval()
    os.makedirs(os.path.join(out, "resnet18", "1"), exist_ok=True)
    with torch.no_grad():
        traced = torch.jit.trace(net, torch.zeros(1, 3, 224, 224))
    traced.save(os.path.join(out, "resnet18", "1", "model.pt"))
    write(os.path.join(out, "resnet18", "config.pbtxt"), """name: "resnet18"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "image" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 1000 ] } ]
# On the 2-core reference VM ResNet-18 runs fastest per image at batch 2
# (larger batches spill the cache; see bench/results), hence preferred 2,
# and two single-threaded instances keep both cores busy.
dynamic_batching {
  preferred_batch_size: [ 2 ]
  max_queue_delay_microseconds: 2000
  default_queue_policy { max_queue_size: 256 }
}
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
""")
    print("resnet18: written")

    # tiny_mlp: overhead measurement
    torch.manual_seed(0)
    os.makedirs(os.path.join(out, "tiny_mlp", "1"), exist_ok=True)
    torch.jit.script(TinyMLP().eval()).save(os.path.join(out, "tiny_mlp", "1", "model.pt"))
    write(os.path.join(out, "tiny_mlp", "config.pbtxt"), """name: "tiny_mlp"
platform: "pytorch_libtorch"
max_batch_size: 32
input [ { name: "input" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
""")
    print("tiny_mlp: written")

    # breast_cancer: gradient-boosted trees (XGBoost) on a tabular dataset
    acc = train_breast_cancer(os.path.join(out, "breast_cancer"))
    print("breast_cancer: test accuracy %.4f" % acc)

    # breast_cancer_triage: the same trees with business rules in the config (no code): a diagnosis label,
    # "uncertain" below 90% confidence, and the confidence itself
    import shutil
    triage = os.path.join(out, "breast_cancer_triage")
    os.makedirs(os.path.join(triage, "1"), exist_ok=True)
    shutil.copy(os.path.join(out, "breast_cancer", "1", "model.json"), os.path.join(triage, "1", "model.json"))
    shutil.copy(os.path.join(out, "breast_cancer", "labels.txt"), os.path.join(triage, "labels.txt"))
    write(os.path.join(triage, "config.pbtxt"), breast_cancer_config("breast_cancer_triage", """\
parameters { key: "rule:diagnosis"
             value: { string_value: "probabilities | argmax | threshold 0.9 uncertain | label" } }
parameters { key: "rule:confidence" value: { string_value: "probabilities | argmax | score" } }
"""))
    print("breast_cancer_triage: written")

    # license_chat: a generative chat model, trained here (a few minutes on 2 cores)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if not skip_chat:
        import make_chat_model
        make_chat_model.main(out)


ADD_SUB = """\
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    \"\"\"Triton's add/sub example: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1.\"\"\"

    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.dtype0 = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "OUTPUT0")["data_type"])
        self.dtype1 = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "OUTPUT1")["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", (in_0 + in_1).astype(self.dtype0)),
                pb_utils.Tensor("OUTPUT1", (in_0 - in_1).astype(self.dtype1))]))
        return responses
"""

DIGITS_PREPROCESS = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    \"\"\"Raw 8x8 images (grey levels 0..16, as scikit-learn's digits) -> the 0..1 pixels digits was trained on.\"\"\"

    def execute(self, requests):
        responses = []
        for request in requests:
            image = pb_utils.get_input_tensor_by_name(request, "image").as_numpy()
            if image.max(initial=0) > 16:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    "grey levels go from 0 to 16", pb_utils.TritonError.INVALID_ARG)))
                continue
            pixels = image.astype(np.float32) / 16.0
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("pixels", pixels)]))
        return responses
"""


def write_python_examples(out):
    """Python-backend models (Triton's model.py API) and a three-step pipeline around digits."""
    write(os.path.join(out, "add_sub", "1", "model.py"), ADD_SUB)
    write(os.path.join(out, "add_sub", "config.pbtxt"), """name: "add_sub"
backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
""")
    print("add_sub: written")
    write(os.path.join(out, "digits_preprocess", "1", "model.py"), DIGITS_PREPROCESS)
    write(os.path.join(out, "digits_preprocess", "config.pbtxt"), """name: "digits_preprocess"
backend: "python"
max_batch_size: 64
input [ { name: "image" data_type: TYPE_UINT8 dims: [ 64 ] } ]
output [ { name: "pixels" data_type: TYPE_FP32 dims: [ 64 ] } ]
dynamic_batching { }
""")
    print("digits_preprocess: written")
    os.makedirs(os.path.join(out, "digits_pipeline", "1"), exist_ok=True)
    write(os.path.join(out, "digits_pipeline", "labels.txt"), "".join("%d\n" % i for i in range(10)))
    write(os.path.join(out, "digits_pipeline", "config.pbtxt"), """name: "digits_pipeline"
platform: "ensemble"
max_batch_size: 64
input [ { name: "image" data_type: TYPE_UINT8 dims: [ 64 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] label_filename: "labels.txt" } ]
ensemble_scheduling {
  step [
    { model_name: "digits_preprocess" model_version: -1
      input_map { key: "image" value: "image" }
      output_map { key: "pixels" value: "pixels" } },
    { model_name: "digits" model_version: -1
      input_map { key: "pixels" value: "pixels" }
      output_map { key: "probabilities" value: "probabilities" } }
  ]
}
parameters { key: "rule:digit" value: { string_value: "probabilities | argmax | threshold 0.8 unsure | label" } }
parameters { key: "rule:confidence" value: { string_value: "probabilities | argmax | score" } }
""")
    print("digits_pipeline: written")


def train_breast_cancer(model_dir):
    import numpy as np
    import xgboost as xgb
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    data = load_breast_cancer()
    x = data.data.astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, data.target, test_size=0.25, random_state=0, stratify=data.target)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 6, "eta": 0.1, "nthread": 1, "seed": 0},
                        xgb.DMatrix(xtr, label=ytr), 300)
    acc = float(((booster.predict(xgb.DMatrix(xte)) > 0.5) == yte).mean())
    os.makedirs(os.path.join(model_dir, "1"), exist_ok=True)
    booster.save_model(os.path.join(model_dir, "1", "model.json"))
    write(os.path.join(model_dir, "ACCURACY"), "test accuracy %.4f on %d held-out tumours\n" % (acc, len(yte)))
    write(os.path.join(model_dir, "labels.txt"), "malignant\nbenign\n")
    write(os.path.join(model_dir, "config.pbtxt"), breast_cancer_config("breast_cancer"))
    return acc


def breast_cancer_config(name, extra=""):
    return """name: "%s"
backend: "xgboost"
max_batch_size: 256
input [ { name: "features" data_type: TYPE_FP32 dims: [ 30 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 2 ] label_filename: "labels.txt" } ]
dynamic_batching { }
# [P(malignant), P(benign)] per row; "value" would give P(benign) alone.
parameters { key: "predict_type" value: { string_value: "proba" } }
parameters { key: "nthread" value: { string_value: "1" } }
""" % name + extra


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] != "--skip-chat"):
        sys.exit(__doc__)
    main(sys.argv[1], skip_chat=len(sys.argv) == 3)
