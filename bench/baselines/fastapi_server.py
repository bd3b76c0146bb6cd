#!/usr/bin/python3
"""The 'wrap the model in a FastAPI endpoint' baseline.

Serves a TorchScript file behind the same KServe v2 JSON routes inferd answers
(GET /v2/models/{m} metadata, POST /v2/models/{m}/infer), the way the
ML-serving tutorials do it: parse JSON, build a tensor, call the model, return
JSON. One torch thread per worker process; scale with --workers.

Usage: fastapi_server.py --model-repository DIR --model NAME --port P [--workers N]
Runs with Debian's python3-fastapi, python3-uvicorn and python3-torch.
"""
import argparse
import os
import re

import numpy as np
import torch
import uvicorn
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

DTYPES = {"FP32": np.float32, "FP64": np.float64, "INT64": np.int64, "INT32": np.int32}


def read_config(path):
    """The few config.pbtxt facts this baseline needs (name, dims, datatypes)."""
    text = open(path).read()
    batched = int(re.search(r"max_batch_size:\s*(\d+)", text).group(1)) > 0

    def tensors(section):
        block = re.search(section + r"\s*\[(.*?)\]\s*\n", text, re.S)
        out = []
        for m in re.finditer(r'name:\s*"([^"]+)"\s*data_type:\s*TYPE_(\w+)\s*dims:\s*\[([^\]]*)\]', block.group(1)):
            dims = [int(d) for d in m.group(3).split(",") if d.strip()]
            out.append({"name": m.group(1), "datatype": m.group(2), "shape": ([-1] if batched else []) + dims})
        return out

    return tensors("input"), tensors("output")


def make_app(repo, name):
    torch.set_num_threads(1)
    model = torch.jit.load(os.path.join(repo, name, "1", "model.pt")).eval()
    inputs, outputs = read_config(os.path.join(repo, name, "config.pbtxt"))
    app = FastAPI()

    @app.get("/v2/models/{model_name}")
    def metadata(model_name: str):
        if model_name != name:
            raise HTTPException(404, "unknown model")
        return {"name": name, "versions": ["1"], "platform": "pytorch_libtorch", "inputs": inputs, "outputs": outputs}

    @app.post("/v2/models/{model_name}/infer")
    async def infer(model_name: str, request: Request):
        if model_name != name:
            raise HTTPException(404, "unknown model")
        body = await request.json()
        args = []
        for spec in inputs:
            t = next(i for i in body["inputs"] if i["name"] == spec["name"])
            args.append(torch.from_numpy(np.asarray(t["data"], dtype=DTYPES[t["datatype"]]).reshape(t["shape"])))
        with torch.inference_mode():
            y = model(*args)
        y = y.numpy()
        return JSONResponse({"model_name": name, "model_version": "1", "outputs": [
            {"name": outputs[0]["name"], "datatype": "FP32", "shape": list(y.shape), "data": y.ravel().tolist()}]})

    return app


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model-repository", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--port", type=int, default=8100)
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args()
    os.environ["INFERD_BASELINE_REPO"], os.environ["INFERD_BASELINE_MODEL"] = a.model_repository, a.model
    uvicorn.run("fastapi_server:app_from_env", factory=True, host="127.0.0.1", port=a.port, workers=a.workers,
                log_level="warning", app_dir=os.path.dirname(os.path.abspath(__file__)))


def app_from_env():
    return make_app(os.environ["INFERD_BASELINE_REPO"], os.environ["INFERD_BASELINE_MODEL"])


if __name__ == "__main__":
    main()
