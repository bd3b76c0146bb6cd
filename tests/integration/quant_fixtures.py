"""Fixtures of models quantised at load time (docs/quantization.md; suite_quantization.py), all over the trained
digits classifier of digits_onnx (64 -> 64 -> 10, exported by torch.onnx; made by make_examples.py first):

  quant_digits          quantization "int8", probabilities labelled (a classifier output: judged by top-1) and a
                        calibration.json of 64 training digits (two requests): the guard passes, int8 serves
  quant_digits_strict   no labels (the probabilities judged by relative error) and max_relative_error 1e-9: the
                        guard rejects int8, FP32 serves and the index says why
  quant_digits_warmup   no calibration file: the guard runs the config's model_warmup (random pixels)
  quant_digits_nodata   neither: FP32 serves ("no data to check int8 against")
  quant_digits_unchecked  quantization.guard "off": int8 serves unchecked
  quant_digits_badcal   a calibration.json whose datatype is wrong: the load fails naming the file
  quant_digits_ts       the same classifier as TorchScript (digits' model.pt, trained by make_examples.py) with
                        quantization "int8" and quant_digits' calibration.json: its two nn.Linear layers int8
  quant_resnet_ts       resnet18's TorchScript file (traced: aten::_convolution; random weights) with quantization
                        "int8" and the guard off: its 20 convolutions (ReLUs fused) and its Linear in int8
  quant_cnn             onnx_cnn's file (two convolutions, one with a fused ReLU, and a Gemm) in int8, its warm-up
                        samples (random images) as the guard's data
"""
import json
import os
import shutil

import numpy as np

CONFIG = """platform: "onnxruntime_onnx"
max_batch_size: 64
input [ { name: "pixels" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] %s} ]
parameters { key: "quantization" value: { string_value: "int8" } }
"""

WARMUP = """model_warmup [ { name: "random" batch_size: 32
  inputs { key: "pixels" value: { data_type: TYPE_FP32 dims: [ 64 ] random_data: true } } } ]
"""


def digits_split():
    """(train x, test x, test y) as make_examples.train_digits splits them."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    xtr, xte, _, yte = train_test_split(x, d.target, test_size=0.25, random_state=0, stratify=d.target)
    return xtr, xte, yte


def _request(x):
    return {"inputs": [{"name": "pixels", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}]}


def _model(repo, name, config, calibration=None, labels=False, source=("digits_onnx", "model.onnx")):
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    shutil.copy(os.path.join(repo, source[0], "1", source[1]), os.path.join(repo, name, "1", source[1]))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config)
    if labels:
        with open(os.path.join(repo, name, "labels.txt"), "w") as f:
            f.write("".join("%d\n" % i for i in range(10)))
    if calibration is not None:
        with open(os.path.join(repo, name, "1", "calibration.json"), "w") as f:
            f.write(calibration if isinstance(calibration, str) else json.dumps(calibration))


def make(repo):
    xtr, _, _ = digits_split()
    calibration = [_request(xtr[:32]), _request(xtr[32:64])]
    labelled = CONFIG % 'label_filename: "labels.txt" '
    plain = CONFIG % ""
    _model(repo, "quant_digits", labelled, calibration, labels=True)
    _model(repo, "quant_digits_ts", labelled.replace('platform: "onnxruntime_onnx"', 'platform: "pytorch_libtorch"'),
           calibration, labels=True, source=("digits", "model.pt"))
    _model(repo, "quant_digits_strict",
           plain + 'parameters { key: "quantization.max_relative_error" value: { string_value: "1e-9" } }\n',
           calibration)
    _model(repo, "quant_digits_warmup", plain + WARMUP)
    _model(repo, "quant_digits_nodata", plain)
    _model(repo, "quant_digits_unchecked",
           plain + 'parameters { key: "quantization.guard" value: { string_value: "off" } }\n')
    _model(repo, "quant_resnet_ts", '''platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "image" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 1000 ] } ]
parameters { key: "quantization" value: { string_value: "int8" } }
parameters { key: "quantization.guard" value: { string_value: "off" } }
''', source=("resnet18", "model.pt"))
    os.makedirs(os.path.join(repo, "quant_cnn", "1"), exist_ok=True)
    shutil.copy(os.path.join(repo, "onnx_cnn", "1", "model.onnx"), os.path.join(repo, "quant_cnn", "1", "model.onnx"))
    with open(os.path.join(repo, "quant_cnn", "config.pbtxt"), "w") as f:
        f.write("""platform: "onnxruntime_onnx"
max_batch_size: 16
input [ { name: "image" data_type: TYPE_FP32 dims: [ 3, 16, 16 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 5 ] } ]
parameters { key: "quantization" value: { string_value: "int8" } }
model_warmup [ { name: "random" batch_size: 16
  inputs { key: "image" value: { data_type: TYPE_FP32 dims: [ 3, 16, 16 ] random_data: true } } } ]
""")
    bad = _request(xtr[:2])
    bad["inputs"][0]["datatype"] = "INT32"
    _model(repo, "quant_digits_badcal", plain, bad)
