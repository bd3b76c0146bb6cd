"""Integration suite: models of other frameworks (XGBoost, Triton's FIL
layout) served next to TorchScript; answers compared with the framework's own
predict on the same files (run by run_tests.py)."""
import concurrent.futures
import json
import os
import sys
import unittest

import numpy as np
import torch
import xgboost as xgb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
import onnx_fixtures as O  # noqa: E402
import tree_fixtures as T  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

# The fixture models the shared server (C.SERVER) serves.
setUpModule = C.serving("breast_cancer", "breast_cancer_triage", "digits", "digits_both", "digits_onnx",
                        "digits_pipeline", "digits_preprocess", "fil_softprob", "onnx_bigru", "onnx_bigru_o13",
                        "onnx_cnn", "onnx_cnn_o13", "onnx_corrupt", "onnx_cycle", "onnx_dtypes", "onnx_encoder",
                        "onnx_encoder_o13", "onnx_escape", "onnx_external", "onnx_fill", "onnx_fill_1mib",
                        "onnx_fill_bad_limit", "onnx_gru", "onnx_gru_o13", "onnx_lstm", "onnx_lstm_o17",
                        "onnx_missing", "onnx_mlp", "onnx_mlp_o17", "onnx_resnet18", "onnx_resnet18_o17",
                        "onnx_unsupported", "xgb_binary", "xgb_corrupt", "xgb_softprob")

TREE_TOL = 1e-6


def _inputs(name, x):
    """One input (name, array) or several ({name: array}, None)."""
    return name if isinstance(name, dict) else {name: x}


class Served(unittest.TestCase):
    """Request helpers shared by the framework classes (no tests of its own)."""

    def infer_json(self, model, name, x=None):
        st, js = C.SERVER.post_json("/v2/models/%s/infer" % model, ic.v2_json_request(_inputs(name, x)))
        self.assertEqual(st, 200, js)
        out = js["outputs"][0]
        self.assertEqual(out["datatype"], "FP32")
        return np.array(out["data"], np.float32).reshape(out["shape"])

    def infer_binary(self, model, name, x=None):
        body, hlen = ic.v2_binary_request(_inputs(name, x))
        st, hdrs, data = C.SERVER.request("POST", "/v2/models/%s/infer" % model, body,
                                        {"Inference-Header-Content-Length": str(hlen)})
        self.assertEqual(st, 200, data[:300])
        _, outs = ic.decode_v2_response(hdrs, data)
        return next(iter(outs.values()))

    def infer_grpc(self, model, name, x=None):
        import grpc
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
            stub = s.pb_grpc.GRPCInferenceServiceStub(ch)
            resp = stub.ModelInfer(gc.infer_request(s.pb, model, _inputs(name, x)), timeout=60)
        return next(iter(gc.outputs_of(resp).values()))



class Trees(Served):
    def assert_equal_to(self, got, want):
        self.assertEqual(tuple(got.shape), tuple(want.shape))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=TREE_TOL, rtol=0)

    def test_auto_completed_xgboost_model_matches_python_predict(self):
        st, cfg = C.SERVER.get_json("/v2/models/xgb_binary/config")
        self.assertEqual(st, 200, cfg)
        self.assertEqual(cfg["backend"], "xgboost")
        self.assertEqual(cfg["max_batch_size"], 256)
        self.assertIn("dynamic_batching", cfg)
        self.assertEqual([(i["name"], i["data_type"], i["dims"]) for i in cfg["input"]],
                         [("input__0", "TYPE_FP32", [T.FEATURES])])
        st, meta = C.SERVER.get_json("/v2/models/xgb_binary")
        self.assertEqual(meta["outputs"], [{"name": "output__0", "datatype": "FP32", "shape": [-1, 1]}])
        x = T.queries(7, 1)
        want = T.booster(C.REPO, "xgb_binary", "model.json").predict(xgb.DMatrix(x)).reshape(7, 1)
        for infer in (self.infer_json, self.infer_binary, self.infer_grpc):
            self.assert_equal_to(infer("xgb_binary", "input__0", x), want)

    def test_example_breast_cancer_answers_class_probabilities(self):
        from sklearn.datasets import load_breast_cancer
        x = load_breast_cancer().data[:6].astype(np.float32)
        p = T.booster(C.REPO, "breast_cancer", "model.json").predict(xgb.DMatrix(x))
        want = np.stack([1 - p, p], axis=1)
        for infer in (self.infer_json, self.infer_binary, self.infer_grpc):
            self.assert_equal_to(infer("breast_cancer", "features", x), want)

    def test_example_triage_rules_label_each_tumour_or_say_uncertain(self):
        from sklearn.datasets import load_breast_cancer
        x = load_breast_cancer().data[[0, 19, 38, 81, 157]].astype(np.float32)
        p = T.booster(C.REPO, "breast_cancer_triage", "model.json").predict(xgb.DMatrix(x))
        probs = np.stack([1 - p, p], axis=1)
        want = [("malignant", "benign")[int(r.argmax())] if r.max() >= 0.9 else "uncertain" for r in probs]
        self.assertIn("uncertain", want)
        st, js = C.SERVER.post_json("/v2/models/breast_cancer_triage/infer", ic.v2_json_request({"features": x}))
        self.assertEqual(st, 200, js)
        outs = {o["name"]: o["data"] for o in js["outputs"]}
        self.assertEqual(outs["diagnosis"], want)
        np.testing.assert_allclose(outs["confidence"], probs.max(axis=1), rtol=1e-6)

    def test_fil_configuration_serves_the_legacy_binary_file(self):
        x = T.queries(5, 2)
        want = T.booster(C.REPO, "fil_softprob", "xgboost.model").predict(xgb.DMatrix(x))
        self.assertEqual(want.shape, (5, 3))
        for infer in (self.infer_json, self.infer_binary, self.infer_grpc):
            self.assert_equal_to(infer("fil_softprob", "input__0", x), want)

    def test_dynamic_batching_merges_rows_into_one_prediction(self):
        """preferred_batch_size 8 with a 30 s delay: eight one-row requests run as one batch of 8."""
        st, before = C.SERVER.get_json("/v2/models/xgb_softprob/versions/1/stats")
        self.assertEqual(st, 200, before)
        executions = before["model_stats"][0]["execution_count"]
        x = T.queries(8, 3)
        want = T.booster(C.REPO, "xgb_softprob", "model.ubj").predict(xgb.DMatrix(x))
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda i: self.infer_json("xgb_softprob", "features", x[i:i + 1]), range(8)))
        for i in range(8):
            self.assert_equal_to(got[i], want[i:i + 1])
        st, after = C.SERVER.get_json("/v2/models/xgb_softprob/versions/1/stats")
        stats = after["model_stats"][0]
        self.assertEqual(stats["execution_count"], executions + 1, stats)
        self.assertIn(8, [b["batch_size"] for b in stats["batch_stats"]], stats)

    def test_wrong_feature_count_or_datatype_is_a_400(self):
        st, js = C.SERVER.post_json("/v2/models/xgb_binary/infer",
                                    ic.v2_json_request({"input__0": np.zeros((2, 5), np.float32)}))
        self.assertEqual(st, 400, js)
        self.assertIn("input__0", js["error"])
        st, js = C.SERVER.post_json("/v2/models/xgb_binary/infer",
                                    ic.v2_json_request({"input__0": np.zeros((2, T.FEATURES), np.float64)}))
        self.assertEqual(st, 400, js)
        self.assertIn("FP64", js["error"])

    def test_corrupt_model_fails_its_load_and_the_others_serve(self):
        st, js = C.SERVER.get_json("/v2/models/xgb_corrupt/ready")
        self.assertNotEqual(st, 200)
        st, index = C.SERVER.post_json("/v2/repository/index", {})
        self.assertEqual(st, 200, index)
        entry = [m for m in index if m["name"] == "xgb_corrupt"]
        self.assertEqual(len(entry), 1, index)
        self.assertEqual(entry[0]["state"], "UNAVAILABLE", entry)
        self.assertIn("malformed XGBoost JSON model", entry[0]["reason"])
        x = T.queries(2, 4)
        want = T.booster(C.REPO, "xgb_binary", "model.json").predict(xgb.DMatrix(x)).reshape(2, 1)
        self.assert_equal_to(self.infer_json("xgb_binary", "input__0", x), want)


class Onnx(Served):
    """ONNX models exported by torch.onnx, run by inferd's own executor, against PyTorch (abs tol 1e-4)."""

    TOL = 1e-4

    def assert_close(self, got, want):
        self.assertEqual(tuple(got.shape), tuple(want.shape))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=self.TOL, rtol=0)

    def reference(self, module, x):
        with torch.no_grad():
            return module(torch.from_numpy(x)).numpy()

    def test_auto_completed_mlp_matches_pytorch_at_batch_1_and_8(self):
        st, cfg = C.SERVER.get_json("/v2/models/onnx_mlp/config")
        self.assertEqual(st, 200, cfg)
        self.assertEqual((cfg["backend"], cfg["platform"], cfg["max_batch_size"]), ("onnxruntime", "onnxruntime_onnx", 32))
        self.assertEqual([(i["name"], i["data_type"], i["dims"]) for i in cfg["input"]], [("x", "TYPE_FP32", [8])])
        mlp, _ = O.modules()
        for batch in (1, 8):
            x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
            want = self.reference(mlp, x)
            for infer in (self.infer_json, self.infer_binary, self.infer_grpc):
                self.assert_close(infer("onnx_mlp", "x", x), want)

    def test_cnn_matches_pytorch_also_when_batching_merges_requests(self):
        _, cnn = O.modules()
        x = np.random.default_rng(5).standard_normal((8, 3, 16, 16)).astype(np.float32)
        want = self.reference(cnn, x)
        self.assert_close(self.infer_binary("onnx_cnn", "image", x), want)  # 8 rows: runs at once
        st, before = C.SERVER.get_json("/v2/models/onnx_cnn/versions/1/stats")
        executions = before["model_stats"][0]["execution_count"]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda i: self.infer_grpc("onnx_cnn", "image", x[i:i + 1]), range(8)))
        for i in range(8):
            self.assert_close(got[i], want[i:i + 1])
        st, after = C.SERVER.get_json("/v2/models/onnx_cnn/versions/1/stats")
        self.assertEqual(after["model_stats"][0]["execution_count"], executions + 1, after)

    def test_lstm_gru_and_encoder_match_pytorch(self):
        lstm, gru, enc = O.text_modules()
        for batch in (1, 8):
            rng = np.random.default_rng(batch)
            tokens = rng.integers(0, 50, size=(batch, 9)).astype(np.int64)
            for name, module in (("onnx_lstm", lstm), ("onnx_gru", gru)):
                want = self.reference(module, tokens)
                for infer in (self.infer_json, self.infer_binary, self.infer_grpc):
                    self.assert_close(infer(name, "tokens", tokens), want)
            mask = np.ones((batch, 9), np.int64)
            mask[:, 6:] = 0  # padding at the end
            with torch.no_grad():
                want = enc(torch.from_numpy(tokens), torch.from_numpy(mask)).numpy()
            st, js = C.SERVER.post_json("/v2/models/onnx_encoder/infer",
                                        ic.v2_json_request({"tokens": tokens, "mask": mask}))
            self.assertEqual(st, 200, js)
            got = np.array(js["outputs"][0]["data"], np.float32).reshape(js["outputs"][0]["shape"])
            self.assert_close(got, want)

    def sample(self, name, batch, rng):
        """Inputs for one of O.exports() at a batch size, as {input name: array}."""
        if name.startswith(("onnx_lstm", "onnx_gru", "onnx_bigru")):
            return {"tokens": rng.integers(0, 50, size=(batch, 9)).astype(np.int64)}
        if name.startswith("onnx_encoder"):
            mask = np.ones((batch, 9), np.int64)
            mask[:, 6:] = 0
            return {"tokens": rng.integers(0, 50, size=(batch, 9)).astype(np.int64), "mask": mask}
        shape = {"onnx_mlp": (8,), "onnx_cnn": (3, 16, 16), "onnx_resnet18": (3, 64, 64)}[name.split("_o1")[0]]
        key = "x" if name.startswith("onnx_mlp") else "image"
        return {key: rng.standard_normal((batch,) + shape).astype(np.float32)}

    def test_every_model_at_opsets_13_and_17_matches_pytorch_over_every_protocol(self):
        # ResNet-18, MLP, CNN, LSTM, GRU, bidirectional GRU and encoder, each exported at both opsets, at batch 1 and 8.
        for name, module, _, opset, _, _ in O.exports():
            for model in (name, O.other_opset(name, opset)):
                # onnx_cnn batches with a 30 s delay (8 rows go at once): a lone row of it would wait out the
                # whole delay. The same module at opset 13 (onnx_cnn_o13) takes single rows on every protocol
                # here; onnx_cnn's single rows are checked merged in test_cnn_matches_pytorch_also_when_...
                for batch in ((8,) if model == "onnx_cnn" else (1, 8)):
                    inputs = self.sample(name, batch, np.random.default_rng(batch))
                    with torch.no_grad():
                        want = module(*[torch.from_numpy(v) for v in inputs.values()]).numpy()
                    for infer in (self.infer_json, self.infer_binary, self.infer_grpc):
                        with self.subTest(model=model, batch=batch, protocol=infer.__name__):
                            self.assert_close(infer(model, inputs), want)

    def test_external_data_loads_and_matches_pytorch(self):
        mlp, _ = O.modules()
        x = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
        self.assert_close(self.infer_binary("onnx_external", "x", x), self.reference(mlp, x))

    def test_bad_graphs_fail_their_load_with_the_reason_and_the_rest_serve(self):
        C.assert_failed_loads(self, {
            "onnx_escape": "outside the model folder",
            "onnx_cycle": "topologically sorted",
            "onnx_missing": "weights",
            "onnx_unsupported": "node 'nms' (NonMaxSuppression, opset 13): operator not supported",
        }, {"x": np.zeros((1, 4), np.float32)})
        mlp, _ = O.modules()
        x = np.ones((1, 8), np.float32)
        self.assert_close(self.infer_json("onnx_mlp", "x", x), self.reference(mlp, x))

    def test_fp16_fp64_bool_uint8_int8_and_bytes_over_json_binary_and_grpc(self):
        st, cfg = C.SERVER.get_json("/v2/models/onnx_dtypes/config")
        self.assertEqual(st, 200, cfg)
        self.assertEqual([i["data_type"] for i in cfg["input"]],
                         ["TYPE_FP16", "TYPE_FP64", "TYPE_BOOL", "TYPE_UINT8", "TYPE_INT8", "TYPE_STRING"])
        x = {"h": np.array([[0.5, -1.25, 3.0], [1e-3, 6e4 / 4, -0.0]], np.float16),
             "d": np.array([[1e-300, -2.5, 1e300], [0.1, 0.2, 0.3]], np.float64),
             "b": np.array([[True, False, True], [False, False, True]]),
             "u": np.array([[0, 254, 7], [1, 2, 3]], np.uint8),
             "i": np.array([[-128 + 1, 127, 0], [5, -5, 1]], np.int8)}
        strings = [b"1.5", b"-2", b"1e3", b"0", b"7.25", b"-0.5"]
        want = {"h2": x["h"] * np.float16(2), "d1": x["d"] + 1.0, "nb": ~x["b"], "u1": x["u"] + np.uint8(1),
                "ni": -x["i"], "s_num": np.array([float(v) for v in strings], np.float32).reshape(2, 3)}

        def check(got):
            for name, w in want.items():
                with self.subTest(output=name):
                    g = np.asarray(got[name]).reshape(w.shape).astype(w.dtype)
                    np.testing.assert_array_equal(g, w)
            self.assertEqual([v if isinstance(v, bytes) else v.encode() for v in np.asarray(got["s_same"]).ravel()],
                             strings)

        # JSON: BYTES as strings.
        body = ic.v2_json_request(x)
        body["inputs"].append({"name": "s", "shape": [2, 3], "datatype": "BYTES",
                               "data": [v.decode() for v in strings]})
        st, js = C.SERVER.post_json("/v2/models/onnx_dtypes/infer", body)
        self.assertEqual(st, 200, js)
        check({o["name"]: np.array(o["data"]) for o in js["outputs"]})
        # Binary tensor data, BYTES length-prefixed; outputs in binary too.
        body, hlen = ic.v2_binary_request(x)
        header = json.loads(body[:hlen])
        raw_s = gc.bytes_tensor(strings)
        header["inputs"].append({"name": "s", "shape": [2, 3], "datatype": "BYTES",
                                 "parameters": {"binary_data_size": len(raw_s)}})
        h = json.dumps(header).encode()
        st, hdrs, data = C.SERVER.request("POST", "/v2/models/onnx_dtypes/infer", h + body[hlen:] + raw_s,
                                        {"Inference-Header-Content-Length": str(len(h))})
        self.assertEqual(st, 200, data[:300])
        _, outs = ic.decode_v2_response(hdrs, data)
        check(outs)
        # gRPC, raw contents (BYTES length-prefixed).
        import grpc
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
            stub = s.pb_grpc.GRPCInferenceServiceStub(ch)
            resp = stub.ModelInfer(gc.infer_request(s.pb, "onnx_dtypes", dict(x, s=([2, 3], strings))), timeout=60)
        check(gc.outputs_of(resp))

    def test_a_request_that_asks_for_a_tensor_over_the_limit_is_a_400_and_the_server_serves_on(self):
        def fill(model, rows, cols):
            return C.SERVER.post_json("/v2/models/%s/infer" % model, {"inputs": [
                {"name": "shape", "shape": [2], "datatype": "INT64", "data": [rows, cols]}]})

        st, js = fill("onnx_fill", 2, 3)
        self.assertEqual(st, 200, js)
        self.assertEqual(js["outputs"][0]["shape"], [2, 3])
        self.assertEqual(js["outputs"][0]["data"], [1.0] * 6)
        # 16 GiB against the default cap of 2 GiB, and 4 MiB against a configured 1 MiB.
        for model, rows, limit in (("onnx_fill", 65536, "2.0 GiB"), ("onnx_fill_1mib", 1024, "1.0 MiB")):
            with self.subTest(model=model):
                st, js = fill(model, rows, rows)
                self.assertEqual(st, 400, js)
                self.assertIn("ConstantOfShape", js["error"])
                self.assertIn("exceeds the model's limit of %s per tensor (parameter MAX_TENSOR_BYTES)" % limit,
                              js["error"])
        st, js = fill("onnx_fill_1mib", 512, 512)  # exactly 1 MiB
        self.assertEqual(st, 200, js)
        self.assertEqual(js["outputs"][0]["shape"], [512, 512])
        st, index = C.SERVER.post_json("/v2/repository/index", {})
        entry = [m for m in index if m["name"] == "onnx_fill_bad_limit"][0]
        self.assertEqual(entry["state"], "UNAVAILABLE", entry)
        self.assertIn("parameter MAX_TENSOR_BYTES must be a byte size", entry["reason"])

    def test_corrupt_onnx_file_fails_its_load_and_wrong_datatype_is_a_400(self):
        st, index = C.SERVER.post_json("/v2/repository/index", {})
        entry = [m for m in index if m["name"] == "onnx_corrupt"]
        self.assertEqual(entry[0]["state"], "UNAVAILABLE", entry)
        self.assertIn("not an ONNX model", entry[0]["reason"])
        st, js = C.SERVER.post_json("/v2/models/onnx_mlp/infer", ic.v2_json_request({"x": np.zeros((1, 8), np.float64)}))
        self.assertEqual(st, 400, js)


if __name__ == "__main__":
    unittest.main()
