"""Integration suite: protocol (run by run_tests.py)."""
import json
import os
import socket
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

# The fixture models the shared server (C.SERVER) serves.
setUpModule = C.serving("broken", "mlp", "mlp_labels", "mlp_nobatch", "raises", "resnet18", "tiny_mlp")


class Protocol(unittest.TestCase):
    def test_health_metadata_config(self):
        for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/mlp/ready", "/v2/models/mlp/versions/1/ready"):
            self.assertEqual(C.SERVER.request("GET", path)[0], 200, path)
        st, md = C.SERVER.get_json("/v2")
        self.assertEqual(md["name"], "inferd")
        self.assertIn("binary_tensor_data", md["extensions"])
        st, md = C.SERVER.get_json("/v2/models/resnet18")
        self.assertEqual(md["inputs"], [{"name": "image", "datatype": "FP32", "shape": [-1, 3, 224, 224]}])
        self.assertEqual(md["versions"], ["1"])
        st, cfg = C.SERVER.get_json("/v2/models/resnet18/config")
        self.assertEqual(cfg["max_batch_size"], 8)
        self.assertEqual(cfg["input"][0]["dims"], [3, 224, 224])
        self.assertEqual(cfg["dynamic_batching"]["preferred_batch_size"], [2])
        st, status = C.SERVER.get_json("/v1/models/mlp")
        self.assertEqual(status["model_version_status"][0]["state"], "AVAILABLE")
        st, meta = C.SERVER.get_json("/v1/models/mlp/metadata")
        sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
        self.assertEqual(sig["inputs"]["x"]["dtype"], "DT_FLOAT")

    def test_classification_extension_matches_a_python_reference_over_json_binary_and_grpc(self):
        x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
        logits = C.torch_ref("mlp", x)
        labels = ["cat", "dog", "bird"]

        def reference(k, with_labels=True, rows=logits):
            out = []
            for row in np.asarray(rows, np.float32).reshape(-1, 3):
                order = sorted(range(3), key=lambda c: (-row[c], c))[:k]
                out.append(["%f:%d" % (row[c], c) + (":" + labels[c] if with_labels else "") for c in order])
            return out

        for k in (1, 3):
            with self.subTest(k=k, protocol="json"):
                st, js = C.SERVER.post_json("/v2/models/mlp_labels/infer", ic.v2_json_request(
                    {"x": x}, outputs=[{"name": "y", "parameters": {"classification": k}}]))
                self.assertEqual(st, 200, js)
                out = js["outputs"][0]
                self.assertEqual((out["datatype"], out["shape"]), ("BYTES", [4, k]))
                self.assertEqual(np.array(out["data"]).reshape(4, k).tolist(), reference(k))
            with self.subTest(k=k, protocol="binary"):
                body, hlen = ic.v2_binary_request({"x": x})
                header = json.loads(body[:hlen])
                header["outputs"] = [{"name": "y", "parameters": {"classification": k, "binary_data": True}}]
                h = json.dumps(header).encode()
                st, hdrs, data = C.SERVER.request("POST", "/v2/models/mlp_labels/infer", h + body[hlen:],
                                                  {"Inference-Header-Content-Length": str(len(h))})
                self.assertEqual(st, 200, data[:300])
                _, outs = ic.decode_v2_response(hdrs, data)
                got = [v.decode() if isinstance(v, bytes) else v for v in outs["y"]]
                self.assertEqual(np.array(got).reshape(4, k).tolist(), reference(k))
            with self.subTest(k=k, protocol="grpc"):
                import grpc
                import grpc_client as gc
                s = C.stubs()
                req = gc.infer_request(s.pb, "mlp_labels", {"x": x})
                o = req.outputs.add()
                o.name = "y"
                o.parameters["classification"].int64_param = k  # tritonclient's class_count
                with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
                    resp = s.pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(req, timeout=60)
                self.assertEqual((resp.outputs[0].datatype, list(resp.outputs[0].shape)), ("BYTES", [4, k]))
                got = [v.decode() for v in gc.outputs_of(resp)["y"]]
                self.assertEqual(np.array(got).reshape(4, k).tolist(), reference(k))
        # Without a label file, and without a batch dimension: "value:index", shape [k].
        st, js = C.SERVER.post_json("/v2/models/mlp_nobatch/infer", ic.v2_json_request(
            {"x": x[:1]}, outputs=[{"name": "y", "parameters": {"classification": 2}}]))
        self.assertEqual(st, 200, js)
        self.assertEqual(js["outputs"][0]["shape"], [2])
        self.assertEqual(js["outputs"][0]["data"], reference(2, with_labels=False, rows=logits[:1])[0])
        # More classes than the output has: a clear 400 (Triton returns fewer silently).
        for model in ("mlp_labels", "mlp_nobatch"):
            st, js = C.SERVER.post_json("/v2/models/%s/infer" % model, ic.v2_json_request(
                {"x": x[:1]}, outputs=[{"name": "y", "parameters": {"classification": 4}}]))
            self.assertEqual(st, 400, js)
            self.assertIn("output 'y' has 3 classes; classification asks for 4", js["error"])
        st, js = C.SERVER.post_json("/v2/models/mlp_labels/infer", ic.v2_json_request(
            {"x": x[:1]}, outputs=[{"name": "y", "parameters": {"classification": "3"}}]))
        self.assertEqual(st, 400, js)
        self.assertIn("'classification' must be an integer >= 1", js["error"])

    def test_generate_extension_answers_like_infer(self):
        x = [0.5, -1.0, 2.0, 0.25, 1.0, 0.0, -0.5, 3.0]  # mlp: x [-1, 8]
        st, ref = C.SERVER.post_json("/v2/models/mlp/infer", ic.v2_json_request({"x": np.array([x], np.float32)}))
        self.assertEqual(st, 200, ref)
        want = {o["name"]: o["data"] for o in ref["outputs"]}
        st, js = C.SERVER.post_json("/v2/models/mlp/generate", {"x": x, "id": "g1"})
        self.assertEqual(st, 200, js)
        self.assertEqual(js["model_name"], "mlp")
        self.assertEqual(js["id"], "g1")
        for name, data in want.items():
            self.assertEqual(js[name], data)
        # The stream route: one event for a model that answers once.
        st, hdrs, body = C.SERVER.request("POST", "/v2/models/mlp/generate_stream",
                                          json.dumps({"x": x}).encode(), {"Content-Type": "application/json"})
        self.assertEqual(st, 200, body)
        self.assertTrue(hdrs.get("content-type", "").startswith("text/event-stream"), hdrs)
        text = body.decode()
        self.assertTrue(text.startswith("data: ") and text.endswith("\n\n"), text)
        event = json.loads(text[len("data: "):])
        for name, data in want.items():
            self.assertEqual(event[name], data)
        st, js = C.SERVER.post_json("/v2/models/mlp/generate", {"x": x, "y": 1})
        self.assertEqual(st, 400, js)
        self.assertIn("unexpected key 'y'", js["error"])

    def test_repository_index_reports_the_broken_model(self):
        st, index = C.SERVER.post_json("/v2/repository/index", {})
        self.assertEqual(st, 200)
        by_name = {e["name"]: e for e in index}
        self.assertEqual(by_name["mlp"]["state"], "READY")
        self.assertEqual(by_name["broken"]["state"], "UNAVAILABLE")
        self.assertIn("config.pbtxt", by_name["broken"]["reason"])
        self.assertIn("max_batch_sise", by_name["broken"]["reason"])
        st, ready = C.SERVER.post_json("/v2/repository/index", {"ready": True})
        self.assertNotIn("broken", [e["name"] for e in ready])
        st, js = C.SERVER.post_json("/v2/repository/models/mlp/unload", {})
        self.assertEqual(st, 400)  # control mode none
        self.assertIn("not allowed", js["error"])

    def test_execution_error_keeps_its_cause_and_is_logged(self):
        x = np.ones((1, 4), np.float32)
        st, js = C.SERVER.post_json("/v2/models/raises/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 500, js)
        # TorchScript's traceback is long; the cause at its end survives.
        self.assertTrue(js["error"].endswith("mat1 and mat2 shapes cannot be multiplied (1x4 and 3x5)"), js["error"])
        self.assertIn("model 'raises' failed: ...", js["error"])
        line = C.SERVER.wait_for_log("model 'raises' version 1: execution of a batch of 1 failed")
        self.assertIsNotNone(line, "the failure was not logged")
        self.assertIn("cannot be multiplied", line)

    def test_keep_alive_serves_many_requests_on_one_connection(self):
        conn = C.SERVER.conn()
        x = np.ones((1, 16), np.float32)
        for _ in range(20):
            st, js = C.SERVER.post_json("/v2/models/tiny_mlp/infer", ic.v2_json_request({"input": x}), conn=conn)
            self.assertEqual(st, 200)
        conn.close()

    def test_head_on_health_routes_and_405_names_the_allowed_methods(self):
        for path in ("/v2/health/live", "/v2/health/ready", "/v2", "/v2/models/mlp"):
            st, _, body = C.SERVER.request("HEAD", path)
            self.assertEqual((path, st, body), (path, 200, b""))
        for method, path, allow in (("PUT", "/v2/health/live", "GET, HEAD"),
                                    ("GET", "/v2/models/mlp/infer", "POST"),
                                    ("GET", "/v1/models/mlp:predict", "POST"),
                                    ("DELETE", "/v2/models/mlp/config", "GET, HEAD"),
                                    ("GET", "/v2/repository/models/mlp/rollback", "POST")):
            st, headers, body = C.SERVER.request(method, path)
            self.assertEqual((path, st), (path, 405))
            self.assertEqual(headers.get("allow"), allow, path)
            self.assertIn("not allowed", json.loads(body)["error"])

    def test_pipelined_requests_and_head_without_body(self):
        # Two requests in one write: a HEAD answer must carry no body, or the
        # next response on the connection would be misparsed.
        s = socket.create_connection(("127.0.0.1", C.SERVER.port), timeout=30)
        s.sendall(b"HEAD /v2 HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        first, sep, rest = data.partition(b"\r\n\r\n")
        self.assertTrue(sep)
        self.assertIn(b"Content-Length: ", first)
        self.assertTrue(rest.startswith(b"HTTP/1.1 200 OK\r\n"), rest[:80])
        self.assertIn(b"Connection: close", rest)

    def test_metrics_and_statistics(self):
        st, stats = C.SERVER.get_json("/v2/models/tiny_mlp/versions/1/stats")
        before = stats["model_stats"][0]["inference_count"]
        x = np.ones((2, 16), np.float32)
        C.SERVER.post_json("/v2/models/tiny_mlp/infer", ic.v2_json_request({"input": x}))
        text = C.SERVER.metrics()
        for family in ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                       "nv_inference_exec_count", "nv_inference_pending_request_count",
                       "inferd_request_duration_us_bucket", "inferd_queue_duration_us_bucket",
                       "inferd_compute_infer_duration_us_bucket", "inferd_batch_size_bucket",
                       "process_resident_memory_bytes", "inferd_model_versions_loaded"):
            self.assertIn(family, text)
        st, stats = C.SERVER.get_json("/v2/models/tiny_mlp/versions/1/stats")
        s = stats["model_stats"][0]
        for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
            self.assertIn(key, s["inference_stats"])
        self.assertEqual(s["inference_count"], before + 2)  # the suite's tests run one at a time
        line = [l for l in text.splitlines() if l.startswith('nv_inference_count{model="tiny_mlp",version="1"}')][0]
        self.assertEqual(float(line.split()[-1]), s["inference_count"])
