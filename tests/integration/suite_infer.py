"""Integration suite: infer (run by run_tests.py)."""
import gzip
import json
import os
import subprocess
import sys
import threading
import unittest
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

# The fixture models the shared server (C.SERVER) serves.
setUpModule = C.serving("auto", "auto_pair", "digits", "dtypes", "echo_bytes", "mlp", "mlp_nobatch", "multi_io",
                        "raises", "reshape", "resnet18", "tiny_mlp")


class Infer(unittest.TestCase):
    def assert_close(self, got, want, tol=C.TOL):
        self.assertEqual(tuple(got.shape), tuple(want.shape))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=tol, rtol=0)

    def three_ways(self, model, name, x, out_name, want, tol=C.TOL):
        """v2 JSON, v2 binary and v1 (row and columnar) give the PyTorch answer."""
        st, js = C.SERVER.post_json("/v2/models/%s/infer" % model, ic.v2_json_request({name: x}))
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(js["outputs"][0]["shape"]), want, tol)
        body, hlen = ic.v2_binary_request({name: x})
        st, hdrs, data = C.SERVER.request("POST", "/v2/models/%s/infer" % model, body,
                                        {"Inference-Header-Content-Length": str(hlen)})
        self.assertEqual(st, 200, data[:300])
        _, outs = ic.decode_v2_response(hdrs, data)
        self.assert_close(outs[out_name], want, tol)
        st, js = C.SERVER.post_json("/v1/models/%s:predict" % model, {"instances": x.tolist()})
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["predictions"], np.float32), want, tol)
        st, js = C.SERVER.post_json("/v1/models/%s/versions/1:predict" % model, {"inputs": {name: x.tolist()}})
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"], np.float32), want, tol)

    def test_example_tiny_mlp(self):
        x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
        self.three_ways("tiny_mlp", "input", x, "output", C.torch_ref("tiny_mlp", x))

    def test_example_digits_classifier(self):
        from sklearn.datasets import load_digits
        d = load_digits()
        x = (d.data[:5] / 16.0).astype(np.float32)
        want = C.torch_ref("digits", x)
        self.three_ways("digits", "pixels", x, "probabilities", want)
        st, js = C.SERVER.post_json("/v2/models/digits/infer", ic.v2_json_request({"pixels": x}))
        pred = np.array(js["outputs"][0]["data"]).reshape(5, 10).argmax(1)
        self.assertEqual(pred.tolist(), d.target[:5].tolist())

    def test_example_resnet18(self):
        x = np.random.default_rng(2).standard_normal((1, 3, 224, 224)).astype(np.float32)
        self.three_ways("resnet18", "image", x, "logits", C.torch_ref("resnet18", x), tol=1e-4)

    def test_every_datatype(self):
        ins = C.DTYPE_INPUTS
        want = C.torch_ref("dtypes", *ins.values())
        for binary in (False, True):
            if binary:
                body, hlen = ic.v2_binary_request(ins)
                st, hdrs, data = C.SERVER.request("POST", "/v2/models/dtypes/infer", body,
                                                {"Inference-Header-Content-Length": str(hlen)})
            else:
                body = json.dumps(ic.v2_json_request(ins)).encode()
                st, hdrs, data = C.SERVER.request("POST", "/v2/models/dtypes/infer", body)
            self.assertEqual(st, 200, data[:300])
            js, outs = ic.decode_v2_response(hdrs, data)
            for k, v in want.items():
                self.assertEqual(outs[k].dtype, v.dtype, k)
                np.testing.assert_array_equal(outs[k], v, err_msg=k)
            self.assertEqual({o["name"]: o["datatype"] for o in js["outputs"]}["f16_out"], "FP16")

    def test_tuple_outputs_by_index_name_and_positional_inputs(self):
        a = np.arange(8, dtype=np.float32).reshape(2, 4)
        b = np.full((2, 4), 3, np.float32)
        s, p = C.torch_ref("multi_io", a, b)
        st, js = C.SERVER.post_json("/v2/models/multi_io/infer", ic.v2_json_request({"INPUT__0": a, "INPUT__1": b}))
        self.assertEqual(st, 200, js)
        outs = {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"]) for o in js["outputs"]}
        self.assert_close(outs["OUTPUT__0"], s)
        self.assert_close(outs["OUTPUT__1"], p)
        # Only the requested output comes back.
        st, js = C.SERVER.post_json("/v2/models/multi_io/infer",
                                  ic.v2_json_request({"INPUT__1": b, "INPUT__0": a}, outputs=[{"name": "OUTPUT__1"}]))
        self.assertEqual([o["name"] for o in js["outputs"]], ["OUTPUT__1"])
        st, js = C.SERVER.post_json("/v1/models/multi_io:predict", {"instances": [{"INPUT__0": a[0].tolist(), "INPUT__1": b[0].tolist()}]})
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["predictions"][0]["OUTPUT__1"], np.float32), p[0])

    def test_torchscript_modules_are_optimised_at_load_unless_small_or_told_not_to(self):
        # Every numerical check in these suites compares the served module (optimised or not) with PyTorch running
        # the plain file; here: what the load did, as the log says. A module file of 1 MiB or more is optimised at
        # load; a smaller one once it has run OPTIMIZE_AFTER_RUNS times (OPTIMIZE_FOR_INFERENCE auto, the default).
        for model, what in (("resnet18", "frozen and optimised for inference in "),
                            ("mlp", "to be frozen and optimised for inference after 1000 runs (a small module"),
                            ("mlp_nobatch", "not optimised (OPTIMIZE_FOR_INFERENCE false)"),
                            # its forward() fails on every input: the check cannot run, the plain module serves
                            ("raises", "not optimised (optimisation failed: "),
                            # no input shapes to generate a check input from
                            ("auto", "not optimised (input 'x' has no known shape")):
            line = C.SERVER.wait_for_log("model '%s' version 1 loaded and warmed up" % model)
            self.assertIsNotNone(line, model)
            self.assertIn(what, line, model)

    def test_a_small_module_is_optimised_once_it_proves_hot_and_answers_the_same(self):
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "mlp",
                           "--model-parameter", "OPTIMIZE_AFTER_RUNS=20")
        try:
            line = server.wait_for_log("model 'mlp' version 1 loaded and warmed up")
            self.assertIn("to be frozen and optimised for inference after 20 runs", line)
            xs = [np.random.default_rng(k).standard_normal((1, 8)).astype(np.float32) for k in range(40)]
            conn = server.conn()
            for k, x in enumerate(xs):  # one run each: the plain module, then (from the 20th run) the optimised one
                st, js = server.post_json("/v2/models/mlp/infer", ic.v2_json_request({"x": x}), conn=conn)
                self.assertEqual(st, 200, js)
                self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(1, 3),
                                  C.torch_ref("mlp", x))
                if k == 25:
                    # Optimised on the backend's background thread, off the request path (bounded wait).
                    line = server.wait_for_log("model 'mlp' version 1: frozen and optimised for inference after 20 "
                                               "runs in ")
                    self.assertIsNotNone(line)
            conn.close()
        finally:
            self.assertEqual(server.stop(), 0)

    def test_model_parameter_flag_sets_a_default_parameter(self):
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "mlp",
                           "--model-parameter", "OPTIMIZE_FOR_INFERENCE=false",
                           "--model-parameter", "INTRA_OP_THREAD_COUNT=1")
        try:
            line = server.wait_for_log("model 'mlp' version 1 loaded and warmed up")
            self.assertIn("not optimised (OPTIMIZE_FOR_INFERENCE false)", line)
            x = np.ones((1, 8), np.float32)
            st, js = server.post_json("/v2/models/mlp/infer", ic.v2_json_request({"x": x}))
            self.assertEqual(st, 200, js)
            self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(1, 3), C.torch_ref("mlp", x))
        finally:
            self.assertEqual(server.stop(), 0)
        out = subprocess.run([C.ARGS.inferd, "serve", "--model-repository", C.REPO, "--model-parameter", "novalue"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("--model-parameter 'novalue': expected KEY=VALUE", out.stderr)

    def test_auto_completed_config(self):
        st, md = C.SERVER.get_json("/v2/models/auto")
        self.assertEqual(st, 200, md)
        self.assertEqual(md["inputs"][0]["name"], "x")
        self.assertEqual(md["platform"], "pytorch_libtorch")
        # Outputs as forward() declares them (one tensor), FP32 assumed, any shape: metadata-driven clients work.
        self.assertEqual(md["outputs"], [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [-1]}])
        st, cfg = C.SERVER.get_json("/v2/models/auto/config")
        self.assertEqual([o["name"] for o in cfg["output"]], ["OUTPUT__0"])
        x = np.array([[1.5, 2.0]], np.float32)
        st, js = C.SERVER.post_json("/v2/models/auto/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(1, 2), C.torch_ref("auto", x))
        self.assertEqual(js["outputs"][0]["name"], "OUTPUT__0")
        # A tuple-returning module without config: one output per element; an integer result keeps its datatype.
        st, md = C.SERVER.get_json("/v2/models/auto_pair")
        self.assertEqual(st, 200, md)
        self.assertEqual([o["name"] for o in md["outputs"]], ["OUTPUT__0", "OUTPUT__1"])
        st, js = C.SERVER.post_json("/v2/models/auto_pair/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 200, js)
        by_name = {o["name"]: o for o in js["outputs"]}
        ref = C.torch_ref("auto_pair", x)
        self.assert_close(np.array(by_name["OUTPUT__0"]["data"], np.float32).reshape(1, 2), ref[0])
        self.assertEqual(by_name["OUTPUT__1"]["datatype"], "INT64")
        self.assertEqual(by_name["OUTPUT__1"]["data"], ref[1].flatten().tolist())

    def test_reshape_and_unbatched_model(self):
        x = np.arange(32, dtype=np.float32).reshape(2, 16)
        st, js = C.SERVER.post_json("/v2/models/reshape/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(js["outputs"][0]["shape"]),
                          C.torch_ref("reshape", x.reshape(2, 4, 4)))
        x = np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32)
        st, js = C.SERVER.post_json("/v2/models/mlp_nobatch/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(5, 3), C.torch_ref("mlp_nobatch", x))

    def test_bytes_round_trip(self):
        words = ["hello", "", "quote\"and\\slash", "ünïcode"]
        st, js = C.SERVER.post_json("/v2/models/echo_bytes/infer",
                                  {"inputs": [{"name": "text", "shape": [4], "datatype": "BYTES", "data": words}]})
        self.assertEqual(st, 200, js)
        self.assertEqual(js["outputs"][0]["data"], words)
        raw = b"".join(len(w.encode()).to_bytes(4, "little") + w.encode() for w in words)
        header = json.dumps({"inputs": [{"name": "text", "shape": [4], "datatype": "BYTES",
                                         "parameters": {"binary_data_size": len(raw)}}],
                             "outputs": [{"name": "text_out", "parameters": {"binary_data": True}}]}).encode()
        st, hdrs, data = C.SERVER.request("POST", "/v2/models/echo_bytes/infer", header + raw,
                                        {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(st, 200, data)
        self.assertEqual(data[int(hdrs["inference-header-content-length"]):], raw)

    def test_gzip_request_and_response(self):
        x = np.random.default_rng(4).standard_normal((2, 16)).astype(np.float32)
        body = json.dumps(ic.v2_json_request({"input": x})).encode()
        for enc, packed in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body))):
            st, hdrs, data = C.SERVER.request("POST", "/v2/models/tiny_mlp/infer", packed,
                                            {"Content-Encoding": enc, "Accept-Encoding": "gzip"})
            self.assertEqual(st, 200, data[:200])
            self.assertEqual(hdrs.get("content-encoding"), "gzip")
            _, outs = ic.decode_v2_response(hdrs, data)
            self.assert_close(outs["output"], C.torch_ref("tiny_mlp", x))

    def test_concurrent_clients_get_their_own_answers_batched(self):
        mlp = C.module("mlp")
        errors, lock = [], threading.Lock()

        def client(seed):
            rng = np.random.default_rng(100 + seed)
            conn = C.SERVER.conn()
            for _ in range(25):
                x = rng.standard_normal((int(rng.integers(1, 4)), 8)).astype(np.float32)
                st, js = C.SERVER.post_json("/v2/models/mlp/infer", ic.v2_json_request({"x": x}), conn=conn)
                with torch.no_grad():
                    want = mlp(torch.from_numpy(x)).numpy()
                got = np.array(js["outputs"][0]["data"], np.float32).reshape(js["outputs"][0]["shape"]) if st == 200 else None
                if st != 200 or got.shape != want.shape or np.abs(got - want).max() > C.TOL:
                    with lock:
                        errors.append((st, js))
            conn.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        st, stats = C.SERVER.get_json("/v2/models/mlp/stats")
        s = stats["model_stats"][0]
        self.assertEqual(s["inference_stats"]["success"]["count"], 400)
        self.assertLess(s["execution_count"], 400, "no two requests were ever batched together")
        self.assertTrue(any(b["batch_size"] > 3 for b in s["batch_stats"]), s["batch_stats"])
