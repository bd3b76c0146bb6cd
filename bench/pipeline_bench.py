#!/usr/bin/python3
"""Pipelines benchmark (`make bench-pipelines`, issue 14's targets), every ratio measured in one run:

  (a) an ensemble of two tiny TorchScript models against the client calling the two models back to back
      (`inferd bench --then`): throughput at concurrency 32 (target >= 1.5x) and p50 at concurrency 1 (lower);
  (b) the Python backend: a tiny MLP in numpy (model.py) against the identical MLP in TorchScript on the same
      server (the Python backend's added latency per request at concurrency 1), and against a FastAPI server
      running the same Python function (best of 1 and 2 workers) at concurrency 1 and 32 (target >= 2x).

The same load generator (`inferd bench`, v2 JSON over HTTP) drives every target; one server runs at a time.
Writes bench/results/<date>-<host>-pipelines.{json,md}.

Usage: pipeline_bench.py --inferd build/src/inferd [--quick]
"""
import argparse
import datetime
import json
import os
import platform
import sys
import tempfile

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402

torch.set_num_threads(1)

MLP_FN = '''\
"""The function both the Python-backend model and the FastAPI baseline run: a 16 -> 32 -> 4 MLP in numpy."""
import os

import numpy as np

_W = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights.npz"))
W1, B1, W2, B2 = _W["w1"], _W["b1"], _W["w2"], _W["b2"]


def mlp(x):
    return (np.maximum(x @ W1.T + B1, 0) @ W2.T + B2).astype(np.float32)
'''

MODEL_PY = '''\
import triton_python_backend_utils as pb_utils
from mlp_fn import mlp


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("output", mlp(
            pb_utils.get_input_tensor_by_name(r, "input").as_numpy()))]) for r in requests]
'''

FASTAPI_APP = '''\
"""FastAPI serving the same Python function behind the same KServe v2 JSON routes."""
import os
import sys

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

sys.path.insert(0, os.environ["MLP_DIR"])
from mlp_fn import mlp  # noqa: E402

app = FastAPI()


@app.get("/v2/models/{name}")
def metadata(name: str):
    return {"name": name, "versions": ["1"], "platform": "python",
            "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 16]}],
            "outputs": [{"name": "output", "datatype": "FP32", "shape": [-1, 4]}]}


@app.post("/v2/models/{name}/infer")
async def infer(name: str, request: Request):
    body = await request.json()
    t = body["inputs"][0]
    y = mlp(np.asarray(t["data"], dtype=np.float32).reshape(t["shape"]))
    return JSONResponse({"model_name": name, "model_version": "1", "outputs": [
        {"name": "output", "datatype": "FP32", "shape": list(y.shape), "data": y.ravel().tolist()}]})
'''


class Mlp(nn.Module):
    def __init__(self, w1, b1, w2, b2):
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 32), nn.Linear(32, 4)
        with torch.no_grad():
            self.l1.weight.copy_(torch.from_numpy(w1))
            self.l1.bias.copy_(torch.from_numpy(b1))
            self.l2.weight.copy_(torch.from_numpy(w2))
            self.l2.bias.copy_(torch.from_numpy(b2))

    def forward(self, input):  # noqa: A002
        return self.l2(torch.relu(self.l1(input)))


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def config(name, inputs, outputs, extra=""):
    t = lambda n, d: '{ name: "%s" data_type: TYPE_FP32 dims: [ %d ] }' % (n, d)  # noqa: E731
    return ('name: "%s"\nmax_batch_size: 32\ninput [ %s ]\noutput [ %s ]\n%s' %
            (name, ", ".join(t(*i) for i in inputs), ", ".join(t(*o) for o in outputs), extra))


def make_repo(repo):
    torch.manual_seed(0)
    batching = "dynamic_batching { }\n"
    a = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
    b = nn.Linear(16, 4)
    for name, mod, ins, outs in (("tiny_a", a, [("x", 16)], [("h", 16)]), ("tiny_b", b, [("h", 16)], [("y", 4)])):
        os.makedirs(os.path.join(repo, name, "1"))
        torch.jit.script(mod).save(os.path.join(repo, name, "1", "model.pt"))
        write(os.path.join(repo, name, "config.pbtxt"), config(name, ins, outs, 'platform: "pytorch_libtorch"\n' +
                                                               batching))
    write(os.path.join(repo, "pipe_ab", "config.pbtxt"), config("pipe_ab", [("x", 16)], [("y", 4)], """\
platform: "ensemble"
ensemble_scheduling {
  step [ { model_name: "tiny_a" model_version: -1 input_map { key: "x" value: "x" } output_map { key: "h" value: "h" } },
         { model_name: "tiny_b" model_version: -1 input_map { key: "h" value: "h" } output_map { key: "y" value: "y" } } ]
}
"""))
    os.makedirs(os.path.join(repo, "pipe_ab", "1"))
    rng = np.random.default_rng(0)
    w = {"w1": rng.standard_normal((32, 16)).astype(np.float32) * 0.3, "b1": rng.standard_normal(32).astype(np.float32),
         "w2": rng.standard_normal((4, 32)).astype(np.float32) * 0.3, "b2": rng.standard_normal(4).astype(np.float32)}
    pydir = os.path.join(repo, "mlp_py", "1")
    os.makedirs(pydir)
    np.savez(os.path.join(pydir, "weights.npz"), **w)
    write(os.path.join(pydir, "mlp_fn.py"), MLP_FN)
    write(os.path.join(pydir, "model.py"), MODEL_PY)
    write(os.path.join(repo, "mlp_py", "config.pbtxt"),
          config("mlp_py", [("input", 16)], [("output", 4)], 'backend: "python"\n' + batching))
    os.makedirs(os.path.join(repo, "mlp_ts", "1"))
    ts = torch.jit.script(Mlp(w["w1"], w["b1"], w["w2"], w["b2"]).eval())
    ts.save(os.path.join(repo, "mlp_ts", "1", "model.pt"))
    write(os.path.join(repo, "mlp_ts", "config.pbtxt"),
          config("mlp_ts", [("input", 16)], [("output", 4)], 'platform: "pytorch_libtorch"\n' + batching))
    # The two must compute the same function.
    x = rng.standard_normal((3, 16)).astype(np.float32)
    sys.path.insert(0, pydir)
    import mlp_fn
    with torch.no_grad():
        np.testing.assert_allclose(mlp_fn.mlp(x), ts(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-5)
    return pydir


def pick(rows, label, load):
    for r in rows:
        if r["label"] == label and r["load"] == load:
            return r
    raise KeyError((label, load))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out-dir", default=os.path.join(rb.ROOT, "bench", "results"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="inferd-pipeline-bench-")
    repo = os.path.join(work, "repo")
    pydir = make_repo(repo)
    s = rb.Suite(a, work)
    sweep = ["--concurrency", "1,32"]

    print("[1/3] inferd: ensemble vs back to back; Python backend vs TorchScript", flush=True)
    p, port = s.inferd_server(repo, "pipelines")
    try:
        s.bench("ensemble", port, "pipe_ab", sweep)
        s.bench("back-to-back", port, "tiny_a", sweep + ["--then", "tiny_b"])
        s.bench("python backend", port, "mlp_py", sweep)
        s.bench("torchscript", port, "mlp_ts", sweep)
    finally:
        p.stop()

    print("[2/3] FastAPI running the same Python function", flush=True)
    app_dir = os.path.join(work, "fastapi")
    write(os.path.join(app_dir, "mlp_app.py"), FASTAPI_APP)
    os.environ["MLP_DIR"] = pydir
    tried = []
    for workers in (1, 2):
        port = rb.free_port()
        fp = rb.Proc([rb.PY, "-m", "uvicorn", "--app-dir", app_dir, "mlp_app:app", "--host", "127.0.0.1", "--port",
                      str(port), "--workers", str(workers), "--log-level", "warning"],
                     port, "/v2/models/mlp_py", os.path.join(work, "fastapi-%d.log" % workers))
        try:
            s.bench("fastapi-%dw" % workers, port, "mlp_py", sweep)
            tried.append(workers)
        finally:
            fp.stop()

    print("[3/3] report", flush=True)
    rows = s.rows
    ens1, ens32 = pick(rows, "ensemble", 1), pick(rows, "ensemble", 32)
    b2b1, b2b32 = pick(rows, "back-to-back", 1), pick(rows, "back-to-back", 32)
    py1, py32 = pick(rows, "python backend", 1), pick(rows, "python backend", 32)
    ts1 = pick(rows, "torchscript", 1)
    fa32 = max((pick(rows, "fastapi-%dw" % w, 32) for w in tried), key=lambda r: r["requests_per_s"])
    fa1 = min((pick(rows, "fastapi-%dw" % w, 1) for w in tried), key=lambda r: r["p50_us"])
    targets = [
        ("ensemble vs back-to-back, throughput at c32", ens32["requests_per_s"] / b2b32["requests_per_s"], 1.5),
        ("ensemble vs back-to-back, p50 at c1 (back-to-back / ensemble)", b2b1["p50_us"] / ens1["p50_us"], 1.0),
        ("python backend vs FastAPI (same function), throughput at c32", py32["requests_per_s"] / fa32["requests_per_s"],
         2.0),
        ("python backend vs FastAPI (same function), p50 at c1 (FastAPI / inferd)", fa1["p50_us"] / py1["p50_us"], 2.0),
    ]
    added_us = py1["p50_us"] - ts1["p50_us"]
    date = datetime.date.today().isoformat()
    host = platform.node().split(".")[0] or "host"
    base = os.path.join(a.out_dir, "%s-%s-pipelines" % (date, host))
    os.makedirs(a.out_dir, exist_ok=True)
    with open(base + ".json", "w") as f:
        json.dump({"targets": [{"what": w, "ratio": r, "target": t} for w, r, t in targets],
                   "python_added_p50_us": added_us, "fastapi_workers_tried": tried,
                   "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}, "rows": rows}, f, indent=1)
    lines = ["# Pipelines benchmark %s (%s, %d CPUs)" % (date, host, os.cpu_count()), "",
             "| target | measured | wanted | met |", "|---|---|---|---|"]
    lines += ["| %s | %.2fx | >= %.1fx | %s |" % (w, r, t, "yes" if r >= t else "**no**") for w, r, t in targets]
    lines += ["", "Python backend's added p50 at c1 over the identical TorchScript model: %.0f us "
              "(%.0f us vs %.0f us)." % (added_us, py1["p50_us"], ts1["p50_us"]), "",
              "| label | concurrency | req/s | p50 us | p99 us |", "|---|---|---|---|---|"]
    lines += ["| %s | %d | %.0f | %.0f | %.0f |" % (r["label"], r["load"], r["requests_per_s"], r["p50_us"], r["p99_us"])
              for r in rows]
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("wrote %s.{json,md}" % base)


if __name__ == "__main__":
    main()
