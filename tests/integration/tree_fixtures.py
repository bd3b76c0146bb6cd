"""XGBoost fixtures of the integration repository (make_fixtures.py calls
make()): models trained here with python3-xgboost; the tests compare the
server's answers with xgboost's own predict on the same files.

  xgb_binary    model.json, no config.pbtxt: backend found by the file, spec auto-completed
  xgb_softprob  model.ubj, backend "xgboost", predict_type proba, batches of exactly 8 rows
  fil_softprob  Triton FIL layout: xgboost.model (legacy binary), backend "fil",
                output_class + predict_proba
  xgb_corrupt   a truncated model.json: fails to load, the rest serve
"""
import os

import numpy as np
import xgboost as xgb

FEATURES = 6


def _data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(400, FEATURES)).astype(np.float32)
    X[rng.random(size=X.shape) < 0.05] = np.nan
    return X


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def make(repo):
    X = _data()
    c0, c2 = np.nan_to_num(X[:, 0]), np.nan_to_num(X[:, 2])
    params = {"nthread": 1, "seed": 0, "max_depth": 4}
    binary = xgb.train(dict(params, objective="binary:logistic"), xgb.DMatrix(X, label=(c0 > 0).astype(np.float32)), 20)
    multi = xgb.train(dict(params, objective="multi:softprob", num_class=3),
                      xgb.DMatrix(X, label=np.digitize(c2, [-0.5, 0.5]).astype(np.float32)), 20)

    os.makedirs(os.path.join(repo, "xgb_binary", "1"))
    binary.save_model(os.path.join(repo, "xgb_binary", "1", "model.json"))

    os.makedirs(os.path.join(repo, "xgb_softprob", "1"))
    multi.save_model(os.path.join(repo, "xgb_softprob", "1", "model.ubj"))
    _write(os.path.join(repo, "xgb_softprob", "config.pbtxt"), """backend: "xgboost"
max_batch_size: 64
input [ { name: "features" data_type: TYPE_FP32 dims: [ %d ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 3 ] } ]
dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 30000000 }
parameters { key: "predict_type" value: { string_value: "proba" } }
""" % FEATURES)

    os.makedirs(os.path.join(repo, "fil_softprob", "1"))
    multi.save_model(os.path.join(repo, "fil_softprob", "1", "xgboost.model"))
    _write(os.path.join(repo, "fil_softprob", "config.pbtxt"), """backend: "fil"
max_batch_size: 32
input [ { name: "input__0" data_type: TYPE_FP32 dims: [ %d ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
instance_group [ { kind: KIND_CPU } ]
parameters { key: "model_type" value: { string_value: "xgboost" } }
parameters { key: "output_class" value: { string_value: "true" } }
parameters { key: "predict_proba" value: { string_value: "true" } }
""" % FEATURES)

    os.makedirs(os.path.join(repo, "xgb_corrupt", "1"))
    raw = bytes(binary.save_raw("json"))
    with open(os.path.join(repo, "xgb_corrupt", "1", "model.json"), "wb") as f:
        f.write(raw[:len(raw) // 2])


def booster(repo, name, file):
    b = xgb.Booster()
    b.load_model(os.path.join(repo, name, "1", file))
    return b


def queries(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, FEATURES)).astype(np.float32)
    X[rng.random(size=X.shape) < 0.1] = np.nan
    return X
