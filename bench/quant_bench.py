#!/usr/bin/python3
"""int8 at load time against FP32 (issue 41): the same ONNX files served with `quantization: "int8"` and without,
in one run, on this machine.

  /usr/bin/python3 bench/quant_bench.py --inferd build/src/inferd [--quick] [--out FILE.md]

Models (trained here in a few minutes, seed 0):
  mlp       64 -> 1024 -> 1024 -> 1024 -> 10 MLP on scikit-learn's digits (1,347 training, 450 held-out images)
  mlp_ts, resnet18_ts, resnet18_224_ts  the same trained MLP and ResNet-18 as TorchScript (torch.jit.trace;
            OPTIMIZE_FOR_INFERENCE true on both sides)
  resnet18  the standard ResNet-18 (scripts/make_examples.py) trained on the digits upscaled to 32x32 (3 channels);
            throughput on 224x224 inputs (the same weights, exported at that size), accuracy at 32x32
  encoder   BERT-style (bench/onnx_bench.py's BertStyle: hidden 384, 12 heads, FF 1536, 4 layers, sequence 128,
            random weights) for throughput; a smaller one (hidden 128, 4 heads, 2 layers, sequence 32) trained on
            a token-majority task for agreement

Throughput: `inferd bench --in-process` (the backend interface, no server), every batch size of the list, the best
of each side; with the machine's own kernels, then as on an AVX2 machine without VNNI (ONEDNN_MAX_CPU_ISA=AVX2 and
INFERD_INT8_ISA=avx2 for both sides). Agreement and accuracy: `inferd serve` with both configs (the int8 one through
the accuracy guard, calibration.json of 64 training rows), every held-out row sent to both. Bytes: the quantised
weights (stats) and the whole model's (the ONNX file's initializers, with the quantised ones at their int8 size).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from make_examples import ResNet18  # noqa: E402
from onnx_bench import BertStyle  # noqa: E402
import inferd_client as ic  # noqa: E402

AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "INFERD_INT8_ISA": "avx2"}


def digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    return train_test_split(x, d.target, test_size=0.25, random_state=0, stratify=d.target)


def train(model, x, y, epochs, lr, batch=64):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    return model.eval()


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                 nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))

    def forward(self, x):
        return self.net(x)


class SmallBert(nn.Module):
    """BertStyle's layers, smaller, with a [CLS] classifier: the trained encoder of the agreement check."""

    def __init__(self, vocab=100, d=128, heads=4, ff=512, layers=2, seq=32):
        super().__init__()
        self.body = BertStyle(vocab, d, heads, ff, layers, seq)
        self.head = nn.Linear(d, 2)

    def forward(self, ids):
        return self.head(self.body(ids)[:, 0])


def majority_task(n, seed, seq=32):
    """Token ids 2..99 after a [CLS] of 1; label 1 when most tokens are below 50."""
    g = np.random.default_rng(seed)
    ids = g.integers(2, 100, size=(n, seq))
    ids[:, 0] = 1
    return ids.astype(np.int64), ((ids[:, 1:] < 50).sum(1) > (seq - 1) / 2).astype(np.int64)


def images(x, size=32):
    t = torch.tensor(x).reshape(-1, 1, 8, 8)
    return nn.functional.interpolate(t, size=(size, size), mode="bilinear", align_corners=False).repeat(1, 3, 1, 1)


CONFIG = """platform: "{platform}"
max_batch_size: {batch}
input [ {{ name: "{inp}" data_type: {dtype} dims: {dims} }} ]
output [ {{ name: "{out}" data_type: TYPE_FP32 dims: {out_dims} }} ]
parameters {{ key: "quantization" value: {{ string_value: "{q}" }} }}
parameters {{ key: "compare.classifier_outputs" value: {{ string_value: "{out}" }} }}
"""


def write_pair(repo, name, module, example, inp, out, dims, out_dims, dtype="TYPE_FP32", calibration=None, batch=256,
               torchscript=False):
    """<name>_fp32, <name>_int8 (through the accuracy guard) and <name>_int8raw (guard off: what int8 gives, measured
    on the held-out data whatever the guard decides): one ONNX file (or, with `torchscript`, one traced TorchScript
    file, optimised at load on both sides), three configs. Returns the file's path."""
    paths = []
    for suffix, q in (("fp32", "none"), ("int8", "int8"), ("int8raw", "int8")):
        d = os.path.join(repo, "%s_%s" % (name, suffix))
        os.makedirs(os.path.join(d, "1"))
        path = os.path.join(d, "1", "model.pt" if torchscript else "model.onnx")
        if paths:
            os.link(paths[0], path)
        elif torchscript:
            with torch.no_grad():
                torch.jit.trace(module.eval(), example).save(path)
        else:
            torch.onnx.export(module, example, path, opset_version=17, input_names=[inp], output_names=[out],
                              dynamic_axes={inp: {0: "batch"}, out: {0: "batch"}})
        paths.append(path)
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write(CONFIG.format(batch=batch, inp=inp, dtype=dtype, dims=dims, out=out, out_dims=out_dims, q=q,
                                  platform="pytorch_libtorch" if torchscript else "onnxruntime_onnx"))
            if torchscript:
                f.write('parameters { key: "OPTIMIZE_FOR_INFERENCE" value: { string_value: "true" } }\n')
            if suffix == "int8raw":
                f.write('parameters { key: "quantization.guard" value: { string_value: "off" } }\n')
        if calibration is not None:
            with open(os.path.join(d, "1", "calibration.json"), "w") as f:
                json.dump(calibration, f)
    return paths[0]


def request(name, arr, datatype):
    return {"inputs": [{"name": name, "datatype": datatype, "shape": list(arr.shape), "data": arr.ravel().tolist()}]}


def throughput(inferd, repo, model, batches, threads, window, env, work):
    out = os.path.join(work, "row.json")
    subprocess.run([inferd, "bench", "-m", model, "--in-process", "--model-repository", repo, "--batch-sizes",
                    ",".join(map(str, batches)), "--threads", str(threads), "--warmup-s", "1", "--duration-s",
                    str(window), "--int-range", "2:99", "--output", out], check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, **env))
    return {r["batch_size"]: r["inferences_per_s"] for r in json.load(open(out))["rows"]}


def initializer_bytes(onnx_path):
    import onnx
    m = onnx.load(onnx_path)
    return sum(int(np.prod(t.dims)) * 4 for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", default=os.path.join(ROOT, "build", "src", "inferd"))
    ap.add_argument("--quick", action="store_true", help="shorter windows and training (a smoke run)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                  "%s-vm-quant.md" % datetime.date.today().isoformat()))
    a = ap.parse_args()
    torch.set_num_threads(os.cpu_count())
    window = 1 if a.quick else 3
    work = tempfile.mkdtemp(prefix="inferd-quant-bench-")
    repo = os.path.join(work, "repo")
    xtr, xte, ytr, yte = digits()
    started = time.time()

    torch.manual_seed(0)
    mlp = train(Mlp(), torch.tensor(xtr), torch.tensor(ytr), 5 if a.quick else 20, 1e-3)
    write_pair(repo, "mlp", mlp, torch.zeros(2, 64), "x", "logits", "[ 64 ]", "[ 10 ]",
               calibration=request("x", xtr[:64], "FP32"))
    write_pair(repo, "mlp_ts", mlp, torch.zeros(2, 64), "x", "logits", "[ 64 ]", "[ 10 ]",
               calibration=request("x", xtr[:64], "FP32"), torchscript=True)
    print("mlp trained (%.0f s)" % (time.time() - started), flush=True)

    torch.manual_seed(0)
    net = train(ResNet18(classes=10), images(xtr), torch.tensor(ytr), 1 if a.quick else 6, 1e-3)
    write_pair(repo, "resnet18", net, torch.zeros(2, 3, 32, 32), "image", "logits", "[ 3, 32, 32 ]", "[ 10 ]",
               calibration=request("image", images(xtr[:64]).numpy(), "FP32"))
    write_pair(repo, "resnet18_224", net, torch.zeros(2, 3, 224, 224), "image", "logits", "[ 3, 224, 224 ]",
               "[ 10 ]", batch=32)
    write_pair(repo, "resnet18_ts", net, torch.zeros(2, 3, 32, 32), "image", "logits", "[ 3, 32, 32 ]", "[ 10 ]",
               calibration=request("image", images(xtr[:64]).numpy(), "FP32"), torchscript=True)
    write_pair(repo, "resnet18_224_ts", net, torch.zeros(2, 3, 224, 224), "image", "logits", "[ 3, 224, 224 ]",
               "[ 10 ]", batch=32, torchscript=True)
    print("resnet18 trained (%.0f s)" % (time.time() - started), flush=True)

    ids_tr, lab_tr = majority_task(4000, 1)
    ids_te, lab_te = majority_task(500, 2)
    torch.manual_seed(0)
    small = train(SmallBert(), torch.tensor(ids_tr), torch.tensor(lab_tr), 1 if a.quick else 4, 1e-3)
    write_pair(repo, "encoder", small, torch.tensor(ids_tr[:2]), "input_ids", "logits", "[ 32 ]", "[ 2 ]",
               dtype="TYPE_INT64", calibration=request("input_ids", ids_tr[:64], "INT64"))
    torch.manual_seed(0)
    bert = BertStyle().eval()
    write_pair(repo, "bert", bert, torch.arange(128).remainder(50).reshape(1, 128), "input_ids", "hidden", "[ 128 ]",
               "[ 128, 384 ]", dtype="TYPE_INT64", batch=32)
    print("encoders ready (%.0f s)" % (time.time() - started), flush=True)

    # Agreement and accuracy through the server (the int8 side through the guard).
    server = ic.Server(a.inferd, repo, "--http-max-body-bytes", "67108864")
    checks = {}
    try:
        def infer(model, name, arr, datatype):
            outs = []
            for i in range(0, len(arr), 32):
                st, js = server.post_json("/v2/models/%s/infer" % model, request(name, arr[i:i + 32], datatype))
                assert st == 200, js
                o = js["outputs"][0]
                outs.append(np.array(o["data"], np.float32).reshape(o["shape"]))
            return np.concatenate(outs)
        for name, inp, data, labels, dt in (("mlp", "x", xte, yte, "FP32"), ("mlp_ts", "x", xte, yte, "FP32"),
                                            ("resnet18", "image", images(xte).numpy(), yte, "FP32"),
                                            ("resnet18_ts", "image", images(xte).numpy(), yte, "FP32"),
                                            ("encoder", "input_ids", ids_te, lab_te, "INT64")):
            f = infer(name + "_fp32", inp, data, dt)
            q = infer(name + "_int8raw", inp, data, dt)
            st, js = server.get_json("/v2/models/%s_int8/stats" % name)
            checks[name] = {"rows": len(data), "agreement": float((f.argmax(1) == q.argmax(1)).mean()),
                            "accuracy_fp32": float((f.argmax(1) == labels).mean()),
                            "accuracy_int8": float((q.argmax(1) == labels).mean()),
                            "relative_error": float(np.linalg.norm(q - f) / np.linalg.norm(f)),
                            "quantization": js["model_stats"][0]["quantization"]}
            print(name, json.dumps(checks[name]), flush=True)
    finally:
        server.stop()

    # Throughput, in-process: the machine's kernels, then AVX2 without VNNI.
    plans = {"mlp": [1, 8, 32, 64, 128, 256], "mlp_ts": [1, 8, 32, 64, 128, 256], "resnet18_224": [1, 4, 8, 16],
             "resnet18_224_ts": [1, 4, 8, 16], "bert": [1, 4, 8, 16]}
    if a.quick:
        plans = {k: v[:3] for k, v in plans.items()}
    speed = {}
    for isa, env in (("native", {}), ("avx2", AVX2_ENV)):
        for name, batches in plans.items():
            f = throughput(a.inferd, repo, name + "_fp32", batches, a.threads, window, env, work)
            q = throughput(a.inferd, repo, name + "_int8raw", batches, a.threads, window, env, work)
            speed[(isa, name)] = (f, q)
            print(isa, name, "fp32", f, "int8", q, flush=True)

    # The whole model's bytes: every float initializer, the quantised ones at their int8 size.
    sizes = {}
    for name in ("mlp", "resnet18", "encoder"):
        fp32 = initializer_bytes(os.path.join(repo, name + "_fp32", "1", "model.onnx"))
        q = checks[name]["quantization"]
        sizes[name] = (fp32, fp32 - q["weight_bytes_fp32"] + q["weight_bytes_int8"])

    targets = {"mlp": 1.5, "mlp_ts": 1.5, "resnet18_224": 1.5, "resnet18_224_ts": 1.5, "bert": 1.4}
    sizes["mlp_ts"], sizes["resnet18_ts"] = sizes["mlp"], sizes["resnet18"]  # the same weights
    lines = ["# int8 at load time vs FP32 (issue 41)", "",
             "%s, %d threads, `bench/quant_bench.py`%s. Throughput in-process (`inferd bench --in-process`), best batch "
             "of each side; agreement and accuracy through `inferd serve` on held-out data (int8 with the guard off; "
             "the guard's own verdict on the calibration rows in the last column)." %
             (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), a.threads, " --quick" if a.quick else ""), "",
             "| model | kernels | FP32 best (rows/s @ batch) | int8 best (rows/s @ batch) | ratio | target |",
             "|---|---|---:|---:|---:|---:|"]
    for (isa, name), (f, q) in speed.items():
        bf, bq = max(f, key=f.get), max(q, key=q.get)
        lines.append("| %s | %s | %.0f @ %d | %.0f @ %d | **%.2f** | >= %.1f |" %
                     (name, "this CPU's" if isa == "native" else "AVX2 (no VNNI)", f[bf], bf, q[bq], bq,
                      q[bq] / f[bf], targets[name]))
    lines += ["", "Per batch size (rows/s, FP32 / int8):", ""]
    for (isa, name), (f, q) in speed.items():
        lines.append("- %s, %s: %s" % (name, isa, ", ".join("%d: %.0f / %.0f (%.2fx)" % (b, f[b], q[b], q[b] / f[b])
                                                             for b in sorted(f))))
    lines += ["", "| model | held-out rows | top-1 agreement | accuracy FP32 | accuracy int8 | relative error | "
              "quantised weights | whole model | the guard (64 calibration rows) |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, c in checks.items():
        q = c["quantization"]
        fp32, int8 = sizes[name]
        lines.append("| %s | %d | **%.2f%%** | %.2f%% | %.2f%% | %.4f | %.1f -> %.1f MiB (**%.2fx**) | %.1f -> %.1f MiB "
                     "(%.2fx) | %s: %s |" %
                     (name, c["rows"], 100 * c["agreement"], 100 * c["accuracy_fp32"], 100 * c["accuracy_int8"],
                      c["relative_error"], q["weight_bytes_fp32"] / 2**20, q["weight_bytes_int8"] / 2**20,
                      q["weight_bytes_int8"] / q["weight_bytes_fp32"], fp32 / 2**20, int8 / 2**20, int8 / fp32,
                      q["serving"], q["reason"]))
    lines += ["", "Total time %.0f s." % (time.time() - started), ""]
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump({"checks": checks, "sizes": sizes,
                   "speed": {"%s/%s" % k: {"fp32": v[0], "int8": v[1]} for k, v in speed.items()}}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
