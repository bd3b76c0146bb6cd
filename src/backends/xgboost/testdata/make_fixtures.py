#!/usr/bin/python3
"""Trains small XGBoost models with Debian's python3-xgboost and writes them
with the inputs and python's predictions, for xgboost_backend_test.cc.

  make_fixtures.py OUT_DIR

OUT_DIR/<case>/model.{json,ubj,bst}, OUT_DIR/<case>/x.f32 (rows x features,
with NaNs), OUT_DIR/<case>/<output>.f32 (python's answers) and
OUT_DIR/manifest.json listing cases: {name, file, features, rows, outputs:
{kind: width}, params}.
"""
import json
import os
import sys

import numpy as np
import xgboost as xgb


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    n, f = 300, 6
    X = rng.normal(size=(n, f)).astype(np.float32)
    X[rng.random(size=X.shape) < 0.05] = np.nan  # missing values
    Xq = rng.normal(size=(37, f)).astype(np.float32)
    Xq[rng.random(size=Xq.shape) < 0.1] = np.nan
    y_bin = (np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) > 0).astype(np.float32)
    y_multi = np.digitize(np.nan_to_num(X[:, 2]), [-0.5, 0.5]).astype(np.float32)
    y_reg = (np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 3])).astype(np.float32)
    groups = [30] * 10

    def train(params, y, rounds=8, group=None):
        d = xgb.DMatrix(X, label=y)
        if group is not None:
            d.set_group(group)
        params = dict(params, nthread=1, seed=0)
        if params.get("booster") != "gblinear":
            params["max_depth"] = 3
        return xgb.train(params, d, rounds)

    models = {
        "binary": train({"objective": "binary:logistic"}, y_bin),
        "logitraw": train({"objective": "binary:logitraw"}, y_bin),
        "softprob": train({"objective": "multi:softprob", "num_class": 3}, y_multi),
        "softmax": train({"objective": "multi:softmax", "num_class": 3}, y_multi),
        "regression": train({"objective": "reg:squarederror"}, y_reg),
        "ranking": train({"objective": "rank:pairwise"}, y_multi, group=groups),
        "dart": train({"objective": "binary:logistic", "booster": "dart", "rate_drop": 0.1}, y_bin),
        "linear": train({"objective": "reg:squarederror", "booster": "gblinear"}, y_reg),
    }
    dq = xgb.DMatrix(Xq)
    manifest = []
    for name, b in models.items():
        for fmt in ("json", "ubj", "bst"):
            case = f"{name}_{fmt}"
            d = os.path.join(out, case)
            os.makedirs(d, exist_ok=True)
            b.save_model(os.path.join(d, f"model.{fmt}"))
            Xq.tofile(os.path.join(d, "x.f32"))
            outputs = {}

            def put(kind, arr):
                arr = np.asarray(arr, dtype=np.float32).reshape(len(Xq), -1)
                arr.tofile(os.path.join(d, f"{kind}.f32"))
                outputs[kind] = int(arr.shape[1])

            value = b.predict(dq)
            put("value", value)
            put("margin", b.predict(dq, output_margin=True))
            if name in ("binary", "logitraw", "dart"):
                p = value if name != "logitraw" else 1 / (1 + np.exp(-value.astype(np.float64)))
                put("proba", np.stack([1 - p, p], axis=1))
                put("class", (p > 0.5).astype(np.float32))
            if name == "softprob":
                put("proba", value)
                put("class", np.argmax(value, axis=1))
            if name == "softmax":
                put("class", value)
            if name in ("binary", "softprob", "regression"):
                put("range", b.predict(dq, iteration_range=(2, 5)))
            manifest.append({"name": case, "file": f"model.{fmt}", "features": f, "rows": len(Xq),
                             "objective": json.loads(b.save_config())["learner"]["objective"]["name"],
                             "outputs": outputs})
    # A pretty-printed JSON model (indentation, newlines) loads too.
    d = os.path.join(out, "pretty_json")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.json"), "w") as fh:
        json.dump(json.loads(models["binary"].save_raw("json")), fh, indent=2)
    Xq.tofile(os.path.join(d, "x.f32"))
    np.asarray(models["binary"].predict(dq), dtype=np.float32).tofile(os.path.join(d, "value.f32"))
    manifest.append({"name": "pretty_json", "file": "model.json", "features": f, "rows": len(Xq),
                     "objective": "binary:logistic", "outputs": {"value": 1}})
    with open(os.path.join(out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
