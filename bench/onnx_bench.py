#!/usr/bin/python3
"""ONNX executor benchmark (issue 13): the same models as TorchScript (inferd's
TorchScript backend, frozen and optimised) and as ONNX (inferd's executor over
ATen; ONNX Runtime through onnxruntime-node), all in-process, same thread
count, batch 1 and every batch size up to 8; reports the ratios.

  /usr/bin/python3 bench/onnx_bench.py --inferd build/src/inferd [--quick] [--out FILE.md]

Models: the example ResNet-18 (scripts/make_examples.py, seed 0; input
[3,224,224]), a transformer encoder core (torch.nn.TransformerEncoder: 4
post-norm layers, d 256, 4 heads, FF 1024, GELU; input embeddings [64,256]),
exported with torch.onnx.export (opset 17, dynamic batch) and traced for
TorchScript; and a BERT-style model (BertStyle: embeddings, 4 layers, hidden
384, 12 heads, sequence 128, token ids in, attention mask from padding)
exported at opsets 13 and 17 (issue 38).
"""
import argparse
import datetime
import json
import math
import os
import socket
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from make_examples import ResNet18  # noqa: E402

BASELINES = os.path.join(ROOT, "bench", "baselines")


class EncoderCore(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class BertLayer(nn.Module):
    """One post-norm BERT layer as Hugging Face writes it (separate Q, K, V
    projections, additive attention mask, erf GELU, LayerNorm eps 1e-12)."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.up, self.down = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x, mask):
        b, s, d = x.shape
        dh = d // self.heads

        def split(t):
            return t.view(b, s, self.heads, dh).transpose(1, 2)
        scores = torch.matmul(split(self.q(x)), split(self.k(x)).transpose(-1, -2)) / math.sqrt(dh) + mask
        ctx = torch.matmul(scores.softmax(-1), split(self.v(x))).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))


class BertStyle(nn.Module):
    """A BERT-style encoder (issue 38): token and position embeddings, 4
    layers, hidden 384, 12 heads, FF 1536, sequence 128; token id 0 is
    padding (masked out of attention). Input: int64 token ids [batch, 128]."""

    def __init__(self, vocab=1000, d=384, heads=12, ff=1536, layers=4, seq=128):
        super().__init__()
        self.word, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(d, heads, ff) for _ in range(layers))

    def forward(self, ids):
        mask = (ids == 0).to(torch.float32)[:, None, None, :] * -10000.0
        x = self.ln(self.word(ids) + self.pos.weight[: ids.shape[1]])
        for layer in self.layers:
            x = layer(x, mask)
        return x


def write_model(repo, name, module, example, in_name, out_name, dims, out_dims, opset=17, in_type="TYPE_FP32"):
    ts_dir = os.path.join(repo, "ts", name, "1")
    ox_dir = os.path.join(repo, "onnx", name, "1")
    os.makedirs(ts_dir)
    os.makedirs(ox_dir)
    with torch.no_grad():
        torch.jit.trace(module, example).save(os.path.join(ts_dir, "model.pt"))
    torch.onnx.export(module, example, os.path.join(ox_dir, "model.onnx"), opset_version=opset, input_names=[in_name],
                      output_names=[out_name], dynamic_axes={in_name: {0: "batch"}, out_name: {0: "batch"}})
    for kind, platform in (("ts", "pytorch_libtorch"), ("onnx", "onnxruntime_onnx")):
        with open(os.path.join(repo, kind, name, "config.pbtxt"), "w") as f:
            f.write('platform: "%s"\nmax_batch_size: 8\ninput [ { name: "%s" data_type: %s dims: %s } ]\n'
                    'output [ { name: "%s" data_type: TYPE_FP32 dims: %s } ]\n'
                    % (platform, in_name if kind == "onnx" else "INPUT__0", in_type, dims, out_name if kind == "onnx"
                       else "OUTPUT__0", out_dims))
    return os.path.join(ox_dir, "model.onnx")


def inferd_rows(inferd, repo, model, label, threads, window, work):
    out = os.path.join(work, "row.json")
    subprocess.run([inferd, "bench", "-m", model, "--in-process", "--model-repository", repo, "--batch-sizes",
                    "1,2,4,8", "--threads", str(threads), "--warmup-s", "1", "--window-s", str(window), "--label",
                    label, "--int-range", "0:50", "--output", out], check=True, stdout=subprocess.DEVNULL)
    rows = json.load(open(out))["rows"]
    return [{"label": label, "model": model, "batch_size": r["batch_size"], "inferences_per_s": r["inferences_per_s"],
             "p50_us": r["p50_us"]} for r in rows]


def ort_rows(onnx_path, shape, model, threads, window):
    p = subprocess.run(["node", os.path.join(BASELINES, "ort_bench.js"), onnx_path, shape, str(threads), "1,2,4,8",
                        str(window)], check=True, capture_output=True, text=True,
                       env=dict(os.environ, NODE_PATH=os.path.join(BASELINES, "node_modules")))
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    for r in rows:
        r["model"] = model
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", default=os.path.join(ROOT, "build", "src", "inferd"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                  "%s-onnx.md" % datetime.date.today().isoformat()))
    a = ap.parse_args()
    threads = os.cpu_count()
    window = 1 if a.quick else 3
    work = tempfile.mkdtemp(prefix="inferd-onnx-bench-")
    torch.manual_seed(0)
    resnet = ResNet18().eval()
    torch.manual_seed(0)
    encoder = EncoderCore().eval()
    paths = {
        "resnet18": (write_model(work, "resnet18", resnet, torch.zeros(1, 3, 224, 224), "image", "logits",
                                 "[ 3, 224, 224 ]", "[ 1000 ]"), "3,224,224"),
        "encoder": (write_model(work, "encoder", encoder, torch.zeros(1, 64, 256), "x", "y", "[ 64, 256 ]",
                                "[ 64, 256 ]"), "64,256"),
    }
    for opset in (13, 17):
        torch.manual_seed(0)
        bert = BertStyle().eval()
        ids = torch.arange(128).remainder(50).reshape(1, 128)
        paths["bert_opset%d" % opset] = (write_model(work, "bert_opset%d" % opset, bert, ids, "input_ids", "hidden",
                                                     "[ 128 ]", "[ 128, 384 ]", opset, "TYPE_INT64"), "i:128")
    rows = []
    for model, (onnx_path, shape) in paths.items():
        print("[%s]" % model, flush=True)
        rows += inferd_rows(a.inferd, os.path.join(work, "ts"), model, "torchscript", threads, window, work)
        rows += inferd_rows(a.inferd, os.path.join(work, "onnx"), model, "inferd onnx", threads, window, work)
        rows += ort_rows(onnx_path, shape, model, threads, window)
    lines = ["# ONNX executor vs TorchScript and ONNX Runtime (in-process, %d threads)" % threads, "",
             "%s, %s, torch %s" % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), socket.gethostname(),
                                   torch.__version__), "",
             "| model | runtime | batch | inferences/s | p50 us |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %d | %.1f | %.0f |" % (r["model"], r["label"], r["batch_size"],
                                                        r["inferences_per_s"], r["p50_us"]))
    lines += ["", "| ratio | batch 1 | best batch | target |", "|---|---|---|---|"]
    for model in paths:
        def pick(label, batch=None):
            rs = [r for r in rows if r["model"] == model and r["label"] == label and
                  (batch is None or r["batch_size"] == batch)]
            return max(rs, key=lambda r: r["inferences_per_s"])["inferences_per_s"]
        for other, target in (("torchscript", ">= 0.9"), ("onnxruntime", ">= 1.0 (issue 38)")):
            lines.append("| %s: inferd onnx / %s | %.2f | %.2f | %s |" % (
                model, other, pick("inferd onnx", 1) / pick(other, 1), pick("inferd onnx") / pick(other), target))
    report = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    open(a.out, "w").write(report)
    json.dump(rows, open(a.out.replace(".md", ".json"), "w"), indent=1)
    print(report)


if __name__ == "__main__":
    main()
