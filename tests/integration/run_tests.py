#!/usr/bin/python3
"""Integration tests: the real inferd binary against a generated repository.

Every numerical answer is compared with the same TorchScript file run by
PyTorch in this process (abs tol 1e-5). No sleeps: tests wait on responses,
on the server's own counters, or on a socket closing.

Usage: run_tests.py --inferd PATH --workdir DIR [--reuse-repository] [unittest args, e.g. a class name]
"""
import argparse
import concurrent.futures
import gzip
import json
import re
import os
import signal
import shutil
import socket
import subprocess
import sys
import threading
import time
import unittest
import zlib

import grpc
import numpy as np
import torch
from google.protobuf import json_format

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
import make_fixtures  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARGS = None
SERVER = None
REPO = None
_STUBS = None
TOL = 1e-5
torch.set_num_threads(1)


# One input per datatype of the `dtypes` fixture, with edge values.
DTYPE_INPUTS = {
    "b": np.array([[True, False, True]]), "i8": np.array([[-128, 5, 63]], np.int8),
    "u8": np.array([[0, 7, 254]], np.uint8), "i16": np.array([[-300, 0, 300]], np.int16),
    "i32": np.array([[-5, 0, 2 ** 30]], np.int32), "i64": np.array([[-(2 ** 40), 1, 2 ** 50]], np.int64),
    "f16": np.array([[0.5, -1.25, 3.0]], np.float16), "f64": np.array([[0.1, 1e-300, -7.5]], np.float64),
}


def module(name, version=1):
    return torch.jit.load(os.path.join(REPO, name, str(version), "model.pt"))


def torch_ref(name, *arrays):
    with torch.no_grad():
        out = module(name)(*[torch.from_numpy(np.ascontiguousarray(a)) for a in arrays])
    if isinstance(out, dict):
        return {k: v.numpy() for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return [v.numpy() for v in out]
    return out.numpy()


def stubs():
    """The gRPC stubs, generated once per run by protoc from proto/."""
    global _STUBS
    if _STUBS is None:
        _STUBS = gc.Stubs(ROOT, os.path.join(ARGS.workdir, "grpc_stubs"))
    return _STUBS


def setUpModule():
    global SERVER, REPO
    REPO = os.path.join(ARGS.workdir, "repository")
    if not ARGS.reuse_repository:
        make_fixtures.main(REPO, ROOT)
    SERVER = ic.Server(ARGS.inferd, REPO, "--http-read-timeout-ms", "1500", "--http-max-body-bytes", "8388608")


def tearDownModule():
    if SERVER:
        rc = SERVER.stop()
        if rc != 0:
            print("".join(SERVER.log))
        assert rc == 0, "inferd exited with %d" % rc


class Infer(unittest.TestCase):
    def assert_close(self, got, want, tol=TOL):
        self.assertEqual(tuple(got.shape), tuple(want.shape))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=tol, rtol=0)

    def three_ways(self, model, name, x, out_name, want, tol=TOL):
        """v2 JSON, v2 binary and v1 (row and columnar) give the PyTorch answer."""
        st, js = SERVER.post_json("/v2/models/%s/infer" % model, ic.v2_json_request({name: x}))
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(js["outputs"][0]["shape"]), want, tol)
        body, hlen = ic.v2_binary_request({name: x})
        st, hdrs, data = SERVER.request("POST", "/v2/models/%s/infer" % model, body,
                                        {"Inference-Header-Content-Length": str(hlen)})
        self.assertEqual(st, 200, data[:300])
        _, outs = ic.decode_v2_response(hdrs, data)
        self.assert_close(outs[out_name], want, tol)
        st, js = SERVER.post_json("/v1/models/%s:predict" % model, {"instances": x.tolist()})
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["predictions"], np.float32), want, tol)
        st, js = SERVER.post_json("/v1/models/%s/versions/1:predict" % model, {"inputs": {name: x.tolist()}})
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"], np.float32), want, tol)

    def test_example_tiny_mlp(self):
        x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
        self.three_ways("tiny_mlp", "input", x, "output", torch_ref("tiny_mlp", x))

    def test_example_digits_classifier(self):
        from sklearn.datasets import load_digits
        d = load_digits()
        x = (d.data[:5] / 16.0).astype(np.float32)
        want = torch_ref("digits", x)
        self.three_ways("digits", "pixels", x, "probabilities", want)
        st, js = SERVER.post_json("/v2/models/digits/infer", ic.v2_json_request({"pixels": x}))
        pred = np.array(js["outputs"][0]["data"]).reshape(5, 10).argmax(1)
        self.assertEqual(pred.tolist(), d.target[:5].tolist())

    def test_example_resnet18(self):
        x = np.random.default_rng(2).standard_normal((1, 3, 224, 224)).astype(np.float32)
        self.three_ways("resnet18", "image", x, "logits", torch_ref("resnet18", x), tol=1e-4)

    def test_every_datatype(self):
        ins = DTYPE_INPUTS
        want = torch_ref("dtypes", *ins.values())
        for binary in (False, True):
            if binary:
                body, hlen = ic.v2_binary_request(ins)
                st, hdrs, data = SERVER.request("POST", "/v2/models/dtypes/infer", body,
                                                {"Inference-Header-Content-Length": str(hlen)})
            else:
                body = json.dumps(ic.v2_json_request(ins)).encode()
                st, hdrs, data = SERVER.request("POST", "/v2/models/dtypes/infer", body)
            self.assertEqual(st, 200, data[:300])
            js, outs = ic.decode_v2_response(hdrs, data)
            for k, v in want.items():
                self.assertEqual(outs[k].dtype, v.dtype, k)
                np.testing.assert_array_equal(outs[k], v, err_msg=k)
            self.assertEqual({o["name"]: o["datatype"] for o in js["outputs"]}["f16_out"], "FP16")

    def test_tuple_outputs_by_index_name_and_positional_inputs(self):
        a = np.arange(8, dtype=np.float32).reshape(2, 4)
        b = np.full((2, 4), 3, np.float32)
        s, p = torch_ref("multi_io", a, b)
        st, js = SERVER.post_json("/v2/models/multi_io/infer", ic.v2_json_request({"INPUT__0": a, "INPUT__1": b}))
        self.assertEqual(st, 200, js)
        outs = {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"]) for o in js["outputs"]}
        self.assert_close(outs["OUTPUT__0"], s)
        self.assert_close(outs["OUTPUT__1"], p)
        # Only the requested output comes back.
        st, js = SERVER.post_json("/v2/models/multi_io/infer",
                                  ic.v2_json_request({"INPUT__1": b, "INPUT__0": a}, outputs=[{"name": "OUTPUT__1"}]))
        self.assertEqual([o["name"] for o in js["outputs"]], ["OUTPUT__1"])
        st, js = SERVER.post_json("/v1/models/multi_io:predict", {"instances": [{"INPUT__0": a[0].tolist(), "INPUT__1": b[0].tolist()}]})
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["predictions"][0]["OUTPUT__1"], np.float32), p[0])

    def test_auto_completed_config(self):
        st, md = SERVER.get_json("/v2/models/auto")
        self.assertEqual(st, 200, md)
        self.assertEqual(md["inputs"][0]["name"], "x")
        self.assertEqual(md["platform"], "pytorch_libtorch")
        x = np.array([[1.5, 2.0]], np.float32)
        st, js = SERVER.post_json("/v2/models/auto/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(1, 2), torch_ref("auto", x))

    def test_reshape_and_unbatched_model(self):
        x = np.arange(32, dtype=np.float32).reshape(2, 16)
        st, js = SERVER.post_json("/v2/models/reshape/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(js["outputs"][0]["shape"]),
                          torch_ref("reshape", x.reshape(2, 4, 4)))
        x = np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32)
        st, js = SERVER.post_json("/v2/models/mlp_nobatch/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 200, js)
        self.assert_close(np.array(js["outputs"][0]["data"], np.float32).reshape(5, 3), torch_ref("mlp_nobatch", x))

    def test_bytes_round_trip(self):
        words = ["hello", "", "quote\"and\\slash", "ünïcode"]
        st, js = SERVER.post_json("/v2/models/echo_bytes/infer",
                                  {"inputs": [{"name": "text", "shape": [4], "datatype": "BYTES", "data": words}]})
        self.assertEqual(st, 200, js)
        self.assertEqual(js["outputs"][0]["data"], words)
        raw = b"".join(len(w.encode()).to_bytes(4, "little") + w.encode() for w in words)
        header = json.dumps({"inputs": [{"name": "text", "shape": [4], "datatype": "BYTES",
                                         "parameters": {"binary_data_size": len(raw)}}],
                             "outputs": [{"name": "text_out", "parameters": {"binary_data": True}}]}).encode()
        st, hdrs, data = SERVER.request("POST", "/v2/models/echo_bytes/infer", header + raw,
                                        {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(st, 200, data)
        self.assertEqual(data[int(hdrs["inference-header-content-length"]):], raw)

    def test_gzip_request_and_response(self):
        x = np.random.default_rng(4).standard_normal((2, 16)).astype(np.float32)
        body = json.dumps(ic.v2_json_request({"input": x})).encode()
        for enc, packed in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body))):
            st, hdrs, data = SERVER.request("POST", "/v2/models/tiny_mlp/infer", packed,
                                            {"Content-Encoding": enc, "Accept-Encoding": "gzip"})
            self.assertEqual(st, 200, data[:200])
            self.assertEqual(hdrs.get("content-encoding"), "gzip")
            _, outs = ic.decode_v2_response(hdrs, data)
            self.assert_close(outs["output"], torch_ref("tiny_mlp", x))

    def test_concurrent_clients_get_their_own_answers_batched(self):
        mlp = module("mlp")
        errors, lock = [], threading.Lock()

        def client(seed):
            rng = np.random.default_rng(100 + seed)
            conn = SERVER.conn()
            for _ in range(25):
                x = rng.standard_normal((int(rng.integers(1, 4)), 8)).astype(np.float32)
                st, js = SERVER.post_json("/v2/models/mlp/infer", ic.v2_json_request({"x": x}), conn=conn)
                with torch.no_grad():
                    want = mlp(torch.from_numpy(x)).numpy()
                got = np.array(js["outputs"][0]["data"], np.float32).reshape(js["outputs"][0]["shape"]) if st == 200 else None
                if st != 200 or got.shape != want.shape or np.abs(got - want).max() > TOL:
                    with lock:
                        errors.append((st, js))
            conn.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        st, stats = SERVER.get_json("/v2/models/mlp/stats")
        s = stats["model_stats"][0]
        self.assertEqual(s["inference_stats"]["success"]["count"], 400)
        self.assertLess(s["execution_count"], 400, "no two requests were ever batched together")
        self.assertTrue(any(b["batch_size"] > 3 for b in s["batch_stats"]), s["batch_stats"])


class Protocol(unittest.TestCase):
    def test_health_metadata_config(self):
        for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/mlp/ready", "/v2/models/mlp/versions/1/ready"):
            self.assertEqual(SERVER.request("GET", path)[0], 200, path)
        st, md = SERVER.get_json("/v2")
        self.assertEqual(md["name"], "inferd")
        self.assertIn("binary_tensor_data", md["extensions"])
        st, md = SERVER.get_json("/v2/models/resnet18")
        self.assertEqual(md["inputs"], [{"name": "image", "datatype": "FP32", "shape": [-1, 3, 224, 224]}])
        self.assertEqual(md["versions"], ["1"])
        st, cfg = SERVER.get_json("/v2/models/resnet18/config")
        self.assertEqual(cfg["max_batch_size"], 8)
        self.assertEqual(cfg["input"][0]["dims"], [3, 224, 224])
        self.assertEqual(cfg["dynamic_batching"]["preferred_batch_size"], [2])
        st, status = SERVER.get_json("/v1/models/mlp")
        self.assertEqual(status["model_version_status"][0]["state"], "AVAILABLE")
        st, meta = SERVER.get_json("/v1/models/mlp/metadata")
        sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
        self.assertEqual(sig["inputs"]["x"]["dtype"], "DT_FLOAT")

    def test_repository_index_reports_the_broken_model(self):
        st, index = SERVER.post_json("/v2/repository/index", {})
        self.assertEqual(st, 200)
        by_name = {e["name"]: e for e in index}
        self.assertEqual(by_name["mlp"]["state"], "READY")
        self.assertEqual(by_name["broken"]["state"], "UNAVAILABLE")
        self.assertIn("config.pbtxt", by_name["broken"]["reason"])
        self.assertIn("max_batch_sise", by_name["broken"]["reason"])
        st, ready = SERVER.post_json("/v2/repository/index", {"ready": True})
        self.assertNotIn("broken", [e["name"] for e in ready])
        st, js = SERVER.post_json("/v2/repository/models/mlp/unload", {})
        self.assertEqual(st, 400)  # control mode none
        self.assertIn("not allowed", js["error"])

    def test_execution_error_keeps_its_cause_and_is_logged(self):
        x = np.ones((1, 4), np.float32)
        st, js = SERVER.post_json("/v2/models/raises/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 500, js)
        # TorchScript's traceback is long; the cause at its end survives.
        self.assertTrue(js["error"].endswith("mat1 and mat2 shapes cannot be multiplied (1x4 and 3x5)"), js["error"])
        self.assertIn("model 'raises' failed: ...", js["error"])
        line = SERVER.wait_for_log("model 'raises' version 1: execution of a batch of 1 failed")
        self.assertIsNotNone(line, "the failure was not logged")
        self.assertIn("cannot be multiplied", line)

    def test_keep_alive_serves_many_requests_on_one_connection(self):
        conn = SERVER.conn()
        x = np.ones((1, 16), np.float32)
        for _ in range(20):
            st, js = SERVER.post_json("/v2/models/tiny_mlp/infer", ic.v2_json_request({"input": x}), conn=conn)
            self.assertEqual(st, 200)
        conn.close()

    def test_head_on_health_routes_and_405_names_the_allowed_methods(self):
        for path in ("/v2/health/live", "/v2/health/ready", "/v2", "/v2/models/mlp"):
            st, _, body = SERVER.request("HEAD", path)
            self.assertEqual((path, st, body), (path, 200, b""))
        for method, path, allow in (("PUT", "/v2/health/live", "GET, HEAD"),
                                    ("GET", "/v2/models/mlp/infer", "POST"),
                                    ("GET", "/v1/models/mlp:predict", "POST"),
                                    ("DELETE", "/v2/models/mlp/config", "GET, HEAD"),
                                    ("GET", "/v2/repository/models/mlp/rollback", "POST")):
            st, headers, body = SERVER.request(method, path)
            self.assertEqual((path, st), (path, 405))
            self.assertEqual(headers.get("allow"), allow, path)
            self.assertIn("not allowed", json.loads(body)["error"])

    def test_pipelined_requests_and_head_without_body(self):
        # Two requests in one write: a HEAD answer must carry no body, or the
        # next response on the connection would be misparsed.
        s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=30)
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
        x = np.ones((2, 16), np.float32)
        SERVER.post_json("/v2/models/tiny_mlp/infer", ic.v2_json_request({"input": x}))
        text = SERVER.metrics()
        for family in ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                       "nv_inference_exec_count", "nv_inference_pending_request_count",
                       "inferd_request_duration_us_bucket", "inferd_queue_duration_us_bucket",
                       "inferd_compute_infer_duration_us_bucket", "inferd_batch_size_bucket",
                       "process_resident_memory_bytes", "inferd_model_versions_loaded"):
            self.assertIn(family, text)
        st, stats = SERVER.get_json("/v2/models/tiny_mlp/versions/1/stats")
        s = stats["model_stats"][0]
        for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
            self.assertIn(key, s["inference_stats"])
        self.assertGreaterEqual(s["inference_count"], 2)
        line = [l for l in text.splitlines() if l.startswith('nv_inference_count{model="tiny_mlp",version="1"}')][0]
        self.assertGreaterEqual(float(line.split()[-1]), s["inference_count"] - 1)


_spin_steps_per_second = None


def spin_steps(seconds):
    """Steps of the spin fixture that keep its one instance busy for about `seconds` on this build, far longer than
    what a test does meanwhile, so the requests sent behind it are still queued when the test acts on them.

    A step costs ~3 us in the release build and ~13 us under ASan, and TorchScript's first run of a model (its
    profiling run) is 3-15x slower still, so the rate is measured on the server under test after warming up."""
    global _spin_steps_per_second
    if _spin_steps_per_second is None:
        def run(steps):
            start = time.monotonic()
            st, js = SERVER.post_json("/v2/models/spin/infer", ic.v2_json_request({"x": np.array([[steps]], np.float32)}))
            assert st == 200 and js["outputs"][0]["data"] == [steps], (st, js)
            return time.monotonic() - start

        run(1000)  # the profiling run
        run(1000)
        _spin_steps_per_second = 20000 / run(20000)
    return int(seconds * _spin_steps_per_second)


def spin_counts():
    text = SERVER.metrics()
    labels = 'model="spin",version="1"'
    return {"exec": metric(text, "nv_inference_exec_count{%s}" % labels),
            "inferences": metric(text, "nv_inference_count{%s}" % labels),
            "pending": metric(text, "nv_inference_pending_request_count{%s}" % labels),
            "cancelled": metric(text, 'nv_inference_request_failure{%s,reason="CANCELED"}' % labels)}


def wait_spin_pending(test, n, busy=None):
    """Waits until the server holds n spin requests (its own gauge: queued + running), while `busy` runs."""
    while spin_counts()["pending"] != n:
        test.assertFalse(busy and busy.done(), "the busy request ended first: give it more seconds")


class Grpc(unittest.TestCase):
    """The KServe v2 gRPC API, driven by python3-grpcio like any client library."""

    @classmethod
    def setUpClass(cls):
        cls.s = stubs()
        cls.pb = cls.s.pb
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % SERVER.grpc_port)
        cls.stub = cls.s.pb_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def infer(self, model, inputs, **kw):
        return self.stub.ModelInfer(gc.infer_request(self.pb, model, inputs, **kw), timeout=120)

    def assert_still_serving(self):
        x = np.arange(16, dtype=np.float32).reshape(1, 16)
        out = gc.outputs_of(self.infer("tiny_mlp", {"input": x}))
        np.testing.assert_allclose(out["output"], torch_ref("tiny_mlp", x), atol=TOL)

    def assert_rpc_error(self, code, call, text=None):
        with self.assertRaises(grpc.RpcError) as cm:
            call()
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        self.assertTrue(cm.exception.details())
        if text:
            self.assertIn(text, cm.exception.details())
        self.assert_still_serving()

    def http_binary(self, model, inputs):
        body, hlen = ic.v2_binary_request(inputs)
        st, hdrs, data = SERVER.request("POST", "/v2/models/%s/infer" % model, body,
                                        {"Inference-Header-Content-Length": str(hlen)})
        self.assertEqual(st, 200, data[:300])
        return ic.decode_v2_response(hdrs, data)[1]

    def test_health_metadata_config_index_statistics_match_http(self):
        pb, h = self.pb, self.s.health
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest()).live)
        self.assertTrue(self.stub.ServerReady(pb.ServerReadyRequest()).ready)
        health = self.s.health_grpc.HealthStub(self.channel)
        for service in ("", "inference.GRPCInferenceService"):
            self.assertEqual(health.Check(h.HealthCheckRequest(service=service)).status, h.HealthCheckResponse.SERVING)
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: health.Check(h.HealthCheckRequest(service="nope")))
        watch = health.Watch(h.HealthCheckRequest())
        self.assertEqual(next(watch).status, h.HealthCheckResponse.SERVING)
        watch.cancel()
        # Server reflection (what grpcurl uses), spoken in raw bytes: ServerReflectionRequest{list_services: ""}.
        reflect = self.channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        listing = b"".join(reflect(iter([b"\x3a\x00"]), timeout=60))
        for service in (b"inference.GRPCInferenceService", b"grpc.health.v1.Health"):
            self.assertIn(service, listing)

        md = self.stub.ServerMetadata(pb.ServerMetadataRequest())
        st, http_md = SERVER.get_json("/v2")
        self.assertEqual((md.name, md.version, list(md.extensions)),
                         (http_md["name"], http_md["version"], http_md["extensions"]))
        for model in ("resnet18", "dtypes", "echo_bytes", "multi_io"):
            md = self.stub.ModelMetadata(pb.ModelMetadataRequest(name=model))
            st, want = SERVER.get_json("/v2/models/" + model)
            got = json_format.MessageToDict(md, preserving_proto_field_name=True)
            for t in got["inputs"] + got["outputs"]:
                t["shape"] = [int(d) for d in t["shape"]]  # int64 is a string in proto JSON
            self.assertEqual(got, want, model)
            cfg = self.stub.ModelConfig(pb.ModelConfigRequest(name=model)).config
            st, http_cfg = SERVER.get_json("/v2/models/%s/config" % model)
            self.assertEqual(cfg, json_format.Parse(json.dumps(http_cfg), self.s.config.ModelConfig()), model)
        self.assertEqual(self.stub.ModelConfig(pb.ModelConfigRequest(name="resnet18")).config.max_batch_size, 8)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="mlp", version="1")).ready)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="x")).ready)  # Triton: not ready, no error
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="mlp", version="9")).ready)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="broken")).ready)
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND,
                              lambda: self.stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp", version="9")))

        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest())
        st, http_index = SERVER.post_json("/v2/repository/index", {})
        self.assertEqual({m.name: (m.version, m.state, m.reason) for m in index.models},
                         {e["name"]: (e.get("version", ""), e["state"], e["reason"]) for e in http_index})
        ready = self.stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True))
        self.assertNotIn("broken", [m.name for m in ready.models])
        self.assertIn("mlp", [m.name for m in ready.models])
        self.assert_rpc_error(grpc.StatusCode.FAILED_PRECONDITION,
                              lambda: self.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp")),
                              text="explicit")

        x = np.ones((2, 8), np.float32)
        self.infer("mlp", {"x": x})
        stats = self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="mlp", version="1")).model_stats
        st, http_stats = SERVER.get_json("/v2/models/mlp/versions/1/stats")
        want = http_stats["model_stats"][0]
        self.assertEqual((stats[0].name, stats[0].version), ("mlp", "1"))
        self.assertEqual(stats[0].inference_count, want["inference_count"])
        self.assertEqual(stats[0].execution_count, want["execution_count"])
        self.assertEqual(stats[0].inference_stats.success.count, want["inference_stats"]["success"]["count"])
        self.assertEqual(stats[0].inference_stats.success.ns, want["inference_stats"]["success"]["ns"])
        self.assertGreaterEqual(stats[0].inference_count, 2)
        self.assertEqual([b.batch_size for b in stats[0].batch_stats], [b["batch_size"] for b in want["batch_stats"]])
        every = self.stub.ModelStatistics(pb.ModelStatisticsRequest()).model_stats
        self.assertIn("tiny_mlp", [m.name for m in every])

    def test_infer_raw_and_typed_match_pytorch_and_http(self):
        x = np.random.default_rng(11).standard_normal((3, 16)).astype(np.float32)
        want = torch_ref("tiny_mlp", x)
        http = self.http_binary("tiny_mlp", {"input": x})["output"]
        raw = self.infer("tiny_mlp", {"input": x}, id="req-7")
        self.assertEqual((raw.model_name, raw.model_version, raw.id), ("tiny_mlp", "1", "req-7"))
        self.assertEqual(len(raw.raw_output_contents), 1)  # raw in, raw out
        np.testing.assert_allclose(gc.outputs_of(raw)["output"], want, atol=TOL)
        np.testing.assert_array_equal(gc.outputs_of(raw)["output"], http)  # the same bits as HTTP
        typed = self.infer("tiny_mlp", {"input": x}, raw=False)
        self.assertEqual(len(typed.raw_output_contents), 0)  # typed in, typed out
        self.assertEqual(list(typed.outputs[0].shape), [3, 4])
        np.testing.assert_array_equal(gc.outputs_of(typed)["output"], http)

        img = np.random.default_rng(12).standard_normal((1, 3, 224, 224)).astype(np.float32)
        out = gc.outputs_of(self.infer("resnet18", {"image": img}))["logits"]
        np.testing.assert_allclose(out, torch_ref("resnet18", img), atol=1e-4)
        np.testing.assert_array_equal(out, self.http_binary("resnet18", {"image": img})["logits"])

        # Only the requested output comes back; a version can be named.
        a, b = np.arange(8, dtype=np.float32).reshape(2, 4), np.full((2, 4), 3, np.float32)
        resp = self.infer("multi_io", {"INPUT__0": a, "INPUT__1": b}, outputs=["OUTPUT__1"], version="1")
        self.assertEqual([o.name for o in resp.outputs], ["OUTPUT__1"])
        np.testing.assert_allclose(gc.outputs_of(resp)["OUTPUT__1"], torch_ref("multi_io", a, b)[1], atol=TOL)

    def test_every_datatype_raw_and_typed(self):
        ins = DTYPE_INPUTS
        want = torch_ref("dtypes", *ins.values())
        for raw in (True, False):
            resp = self.infer("dtypes", ins, raw=raw)
            outs = gc.outputs_of(resp)
            self.assertEqual({o.name: o.datatype for o in resp.outputs}["f16_out"], "FP16")
            for k, v in want.items():
                self.assertEqual(outs[k].dtype, v.dtype, k)
                np.testing.assert_array_equal(outs[k], v, err_msg="%s raw=%s" % (k, raw))
        words = [b"hello", b"", b"\x00\xffbinary", "ünïcode".encode()]
        for raw in (True, False):
            resp = self.infer("echo_bytes", {"text": ([4], words)}, raw=raw)
            self.assertEqual(gc.outputs_of(resp)["text_out"], words)

    def test_stream_many_in_flight_answers_every_id(self):
        mlp = module("mlp")
        rng = np.random.default_rng(13)
        n = 300
        xs = [rng.standard_normal((1 + k % 3, 8)).astype(np.float32) for k in range(n)]
        bad = {"bad-model": gc.infer_request(self.pb, "nope", {"x": xs[0]}, id="bad-model"),
               "bad-shape": gc.infer_request(self.pb, "mlp", {"x": np.ones((1, 7), np.float32)}, id="bad-shape"),
               "bad-raw": gc.infer_request(self.pb, "mlp", {"x": xs[0]}, id="bad-raw")}
        bad["bad-raw"].raw_input_contents.append(b"extra")

        def requests():
            for k, x in enumerate(xs):
                params = {"triton_enable_empty_final_response": True} if k % 3 == 0 else None
                yield gc.infer_request(self.pb, "mlp", {"x": x}, id=str(k), raw=k % 2 == 0, params=params)
                if k in (10, 150, 290):
                    yield list(bad.values())[(10, 150, 290).index(k)]

        got, errors = {}, {}
        for r in self.stub.ModelStreamInfer(requests(), timeout=300):
            if r.error_message:
                errors[r.infer_response.id] = r.error_message
            else:
                self.assertNotIn(r.infer_response.id, got)
                got[r.infer_response.id] = gc.outputs_of(r.infer_response)["y"]
                final = r.infer_response.parameters.get("triton_final_response")
                self.assertEqual(final.bool_param if final else None,
                                 True if int(r.infer_response.id) % 3 == 0 else None, r.infer_response.id)
        self.assertEqual(set(got), {str(k) for k in range(n)})
        self.assertEqual(set(errors), set(bad))
        self.assertIn("unknown model", errors["bad-model"])
        self.assertIn("raw_input_contents", errors["bad-raw"])
        with torch.no_grad():
            for k, x in enumerate(xs):
                np.testing.assert_allclose(got[str(k)], mlp(torch.from_numpy(x)).numpy(), atol=TOL, err_msg=str(k))

    def spin(self, steps, id=""):
        return gc.infer_request(self.pb, "spin", {"x": np.array([[steps]], np.float32)}, id=id)

    def spin_counts(self):
        return spin_counts()

    def wait_spin_pending(self, n, busy=None):
        wait_spin_pending(self, n, busy)

    def test_cancelled_calls_and_passed_deadlines_never_run(self):
        steps = spin_steps(8)
        before = self.spin_counts()
        busy = self.stub.ModelInfer.future(self.spin(steps, "busy"), timeout=300)
        self.wait_spin_pending(1)
        # A call whose deadline passes while it waits in the queue.
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.ModelInfer(self.spin(0, "late"), timeout=0.5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        # A call the client cancels, and a stream cancelled with two requests queued.
        gone = self.stub.ModelInfer.future(self.spin(0, "gone"), timeout=300)
        hold = threading.Event()

        def stream_requests():
            yield self.spin(0, "s1")
            yield self.spin(0, "s2")
            hold.wait(300)

        stream = self.stub.ModelStreamInfer(stream_requests(), timeout=300)
        self.wait_spin_pending(5, busy)
        gone.cancel()
        stream.cancel()
        hold.set()
        out = gc.outputs_of(busy.result())
        self.assertEqual(out["y"].tolist(), [[steps]])
        self.wait_spin_pending(0)
        after = self.spin_counts()
        self.assertEqual(after["exec"] - before["exec"], 1)  # only the busy request ran
        self.assertEqual(after["inferences"] - before["inferences"], 1)
        self.assertEqual(after["cancelled"] - before["cancelled"], 4)
        self.assertTrue(gone.cancelled())
        self.assert_still_serving()

    def test_thousands_of_concurrent_calls_need_no_thread_each(self):
        def threads():
            with open("/proc/%d/status" % SERVER.proc.pid) as f:
                return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))

        n = 1000
        busy = self.stub.ModelInfer.future(self.spin(spin_steps(10), "busy"), timeout=300)
        self.wait_spin_pending(1)
        idle_threads = threads()
        calls = [self.stub.ModelInfer.future(self.spin(k % 7, str(k)), timeout=300) for k in range(n)]
        self.wait_spin_pending(1 + n, busy)  # every call is held by the server at once
        held_threads = threads()
        self.assertLess(held_threads - idle_threads, 16, (idle_threads, held_threads))
        busy.result()
        for k, call in enumerate(calls):
            r = call.result()
            self.assertEqual(r.id, str(k))
            self.assertEqual(gc.outputs_of(r)["y"].tolist(), [[k % 7]])

    def test_bad_requests_get_the_right_status_and_the_server_keeps_serving(self):
        pb = self.pb
        x = np.ones((1, 16), np.float32)
        INVALID = grpc.StatusCode.INVALID_ARGUMENT

        def req(**kw):
            return gc.infer_request(pb, "tiny_mlp", {"input": x}, **kw)

        def call(r):
            return lambda: self.stub.ModelInfer(r, timeout=60)

        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, call(gc.infer_request(pb, "nope", {"input": x})), "nope")
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, call(req(version="7")))
        self.assert_rpc_error(INVALID, call(gc.infer_request(pb, "tiny_mlp", {"input": np.ones((1, 15), np.float32)})))
        self.assert_rpc_error(INVALID, call(gc.infer_request(pb, "tiny_mlp", {"input": np.ones((1, 16))})), "FP64")
        self.assert_rpc_error(INVALID, call(gc.infer_request(pb, "tiny_mlp", {"other": x})))
        r = req()
        r.raw_input_contents.append(b"\0" * 64)
        self.assert_rpc_error(INVALID, call(r), "raw_input_contents")
        r = req()
        r.raw_input_contents[0] = b"\0" * 63
        self.assert_rpc_error(INVALID, call(r), "bytes")
        r = req()
        r.inputs[0].contents.fp32_contents.append(1.0)
        self.assert_rpc_error(INVALID, call(r), "contents")
        r = req(raw=False)
        r.inputs[0].contents.ClearField("fp32_contents")
        r.inputs[0].contents.int_contents.extend([1] * 16)
        self.assert_rpc_error(INVALID, call(r), "fp32_contents")
        r = req(raw=False)
        del r.inputs[0].contents.fp32_contents[-1]
        self.assert_rpc_error(INVALID, call(r), "number of elements")
        r = req()
        r.inputs[0].datatype = "FP8"
        self.assert_rpc_error(INVALID, call(r), "FP8")
        r = req()
        r.inputs[0].shape[1] = -16
        self.assert_rpc_error(INVALID, call(r))
        r = req()
        r.inputs[0].parameters["shared_memory_region"].string_param = "region0"
        self.assert_rpc_error(grpc.StatusCode.UNIMPLEMENTED, call(r), "shared memory")
        r = gc.infer_request(pb, "echo_bytes", {"text": ([2], [b"ab", b"cd"])})
        r.raw_input_contents[0] = r.raw_input_contents[0][:-1]
        self.assert_rpc_error(INVALID, call(r))
        r = gc.infer_request(pb, "tiny_mlp", {"input": x}, params={"priority": "high"})
        self.assert_rpc_error(INVALID, call(r), "priority")
        # An RPC of Triton's service that inferd does not offer.
        unknown = self.channel.unary_unary("/inference.GRPCInferenceService/SystemSharedMemoryStatus")
        with self.assertRaises(grpc.RpcError) as cm:
            unknown(b"")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assert_still_serving()

    def test_taken_port_fails_the_start(self):
        out = subprocess.run([ARGS.inferd, "serve", "--model-repository", REPO, "--http-port", "0", "--metrics-port",
                              "0", "--host", "127.0.0.1", "--grpc-port", str(SERVER.grpc_port)],
                             capture_output=True, text=True, timeout=180)
        self.assertEqual(out.returncode, 1, out.stderr[-3000:])
        self.assertIn("gRPC: cannot listen on 127.0.0.1:%d" % SERVER.grpc_port, out.stderr)
        self.assert_still_serving()

    def test_message_size_and_stream_flow_limits(self):
        server = ic.Server(ARGS.inferd, REPO, "--grpc-max-message-bytes", "100000", "--grpc-stream-max-in-flight", "1")
        try:
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                stub = self.s.pb_grpc.GRPCInferenceServiceStub(ch)
                big = np.zeros((1, 3, 224, 224), np.float32)  # 602 KB
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.ModelInfer(gc.infer_request(self.pb, "resnet18", {"image": big}), timeout=60)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                x = np.ones((1, 16), np.float32)
                out = gc.outputs_of(stub.ModelInfer(gc.infer_request(self.pb, "tiny_mlp", {"input": x}), timeout=60))
                np.testing.assert_allclose(out["output"], torch_ref("tiny_mlp", x), atol=TOL)
                # A stream that may have 1 request in flight pauses and resumes reading after each: all 60 are answered.
                xs = [np.full((1, 16), k, np.float32) for k in range(60)]
                reqs = (gc.infer_request(self.pb, "tiny_mlp", {"input": v}, id=str(k)) for k, v in enumerate(xs))
                got = {r.infer_response.id: gc.outputs_of(r.infer_response)["output"]
                       for r in stub.ModelStreamInfer(reqs, timeout=120)}
                self.assertEqual(set(got), {str(k) for k in range(60)})
                for k, v in enumerate(xs):
                    np.testing.assert_allclose(got[str(k)], torch_ref("tiny_mlp", v), atol=TOL)
        finally:
            self.assertEqual(server.stop(), 0)


class BadInput(unittest.TestCase):
    def assert_error(self, status, path, body, headers=None, want=400, text=None):
        st, hdrs, data = SERVER.request("POST", path, body, headers or {})
        self.assertEqual(st, want, data[:300])
        if data:
            err = json.loads(data)["error"]
            self.assertTrue(err)
            if text:
                self.assertIn(text, err)
        # The server still answers correctly afterwards.
        x = np.arange(16, dtype=np.float32).reshape(1, 16)
        st, js = SERVER.post_json("/v2/models/tiny_mlp/infer", ic.v2_json_request({"input": x}))
        self.assertEqual(st, 200)
        np.testing.assert_allclose(np.array(js["outputs"][0]["data"]).reshape(1, 4), torch_ref("tiny_mlp", x), atol=TOL)

    def test_a_request_whose_client_hung_up_never_runs(self):
        steps = spin_steps(8)
        before = spin_counts()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            busy = pool.submit(SERVER.post_json, "/v2/models/spin/infer",
                               ic.v2_json_request({"x": np.array([[steps]], np.float32)}))
            wait_spin_pending(self, 1, busy)
            body = json.dumps(ic.v2_json_request({"x": np.array([[0]], np.float32)})).encode()
            c = socket.create_connection(("127.0.0.1", SERVER.port), timeout=60)
            c.sendall(b"POST /v2/models/spin/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
            wait_spin_pending(self, 2, busy)
            c.close()  # the client gives up while its request waits behind the busy one
            st, js = busy.result()
            self.assertEqual(st, 200, js)
            self.assertEqual(js["outputs"][0]["data"], [steps])
        wait_spin_pending(self, 0)
        after = spin_counts()
        self.assertEqual(after["exec"] - before["exec"], 1)  # only the busy request ran
        self.assertEqual(after["cancelled"] - before["cancelled"], 1)

    def test_deeply_nested_json_is_rejected_not_a_stack_overflow(self):
        # 2 million '[' fit the 8 MiB body limit; a recursive JSON parser runs out of stack on them.
        deep = b'{"instances": ' + b"[" * 2_000_000 + b"}"
        self.assert_error(None, "/v1/models/tiny_mlp:predict", deep, want=400, text="malformed JSON")
        deep = b'{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1], "data": ' + b"[" * 2_000_000 + b"}"
        self.assert_error(None, "/v2/models/tiny_mlp/infer", deep, want=400, text="malformed JSON")
        self.assert_error(None, "/v2/repository/index", b'{"ready": ' + b"[" * 2_000_000, want=400)

    def test_bad_requests_get_clear_4xx(self):
        good = ic.v2_json_request({"input": np.ones((1, 16), np.float32)})
        p = "/v2/models/tiny_mlp/infer"

        def mutate(fn):
            b = json.loads(json.dumps(good))
            fn(b)
            return json.dumps(b).encode()

        cases = [
            (p, b"{not json", None, 400, "malformed JSON"),
            (p, mutate(lambda b: b["inputs"][0].update(datatype="INT32", data=[1] * 16)), None, 400, "data-type"),
            (p, mutate(lambda b: b["inputs"][0].update(shape=[1, 15], data=[1.0] * 15)), None, 400, "unexpected shape"),
            (p, mutate(lambda b: b["inputs"][0].update(name="nope")), None, 400, "nope"),
            (p, mutate(lambda b: b.update(inputs=[])), None, 400, "missing input"),
            (p, mutate(lambda b: b["inputs"][0].update(data=[1.0] * 3)), None, 400, "elements"),
            (p, mutate(lambda b: b["inputs"][0].update(datatype="FLOAT")), None, 400, "datatype"),
            ("/v2/models/nope/infer", json.dumps(good).encode(), None, 404, "unknown model"),
            ("/v2/models/tiny_mlp/versions/9/infer", json.dumps(good).encode(), None, 404, "version 9"),
            (p, b"\x1f\x8b\x08garbage", {"Content-Encoding": "gzip"}, 400, "gzip"),
            (p, json.dumps(good).encode(), {"Content-Encoding": "br"}, 415, "Content-Encoding"),
            ("/v2/models/tiny_mlp/frobnicate", b"{}", None, 404, "no route"),
            ("/v1/models/tiny_mlp:predict", b'{"instances": [[1,2]], "inputs": [[1]]}', None, 400, "exactly one"),
            ("/v1/models/tiny_mlp:predict", b'{"instances": [[1,2]]}', None, 400, "unexpected shape"),
        ]
        for path, body, headers, want, text in cases:
            with self.subTest(path=path, text=text):
                self.assert_error(None, path, body, headers, want, text)

    def test_binary_payload_errors(self):
        body, hlen = ic.v2_binary_request({"input": np.ones((1, 16), np.float32)})
        p = "/v2/models/tiny_mlp/infer"
        self.assert_error(None, p, body[:-5], {"Inference-Header-Content-Length": str(hlen)}, 400, "byte size")
        self.assert_error(None, p, body, {"Inference-Header-Content-Length": str(hlen - 3)}, 400, "JSON")
        self.assert_error(None, p, body, {"Inference-Header-Content-Length": str(len(body) + 10)}, 400, "exceeds")
        self.assert_error(None, p, body, {"Inference-Header-Content-Length": "abc"}, 400, "Inference-Header-Content-Length")

    def test_oversized_body_is_413(self):
        # Announce a body over the limit: the server answers 413 without reading it.
        s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=30)
        s.sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (9 << 20))
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        s.close()
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply[:200])
        # Chunked bodies have no length up front: the limit stops them while reading.
        s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=30)
        s.sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        reply = b""
        try:
            for _ in range(20):
                s.sendall(b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            reply = s.recv(4096)
        except ConnectionResetError:
            pass
        s.close()
        self.assertTrue(reply == b"" or reply.startswith(b"HTTP/1.1 413"), reply[:200])
        bomb = gzip.compress(b" " * (20 << 20))
        self.assert_error(None, "/v2/models/tiny_mlp/infer", bomb, {"Content-Encoding": "gzip"}, 413, "limit")

    def test_stalled_client_is_disconnected(self):
        s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=30)
        s.sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inp")
        # The server closes the connection once --http-read-timeout-ms passes:
        # recv returns b"" (or the peer resets); a 30 s socket timeout bounds the wait.
        try:
            data = s.recv(1024)
        except ConnectionResetError:
            data = b""
        s.close()
        self.assertEqual(data, b"")
        self.assert_error(None, "/v2/models/nope/infer", b"{}", None, 404)

    def test_full_queue_answers_503(self):
        x = {"x": np.ones((1, 256), np.float32)}
        results, lock = [], threading.Lock()

        def send():
            st, js = SERVER.post_json("/v2/models/slow/infer", ic.v2_json_request(x))
            with lock:
                results.append((st, js))

        threads = [threading.Thread(target=send) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(st for st, _ in results)
        self.assertIn(200, codes)
        self.assertIn(503, codes, results)
        self.assertTrue(set(codes) <= {200, 503}, codes)
        for st, js in results:
            if st == 503:
                self.assertIn("queue is full", js["error"])


class Bench(unittest.TestCase):
    """`inferd bench` against the live server: a 2-second run and its report."""

    def run_bench(self, *extra, duration="2"):
        out = os.path.join(ARGS.workdir, "bench_report.json")
        cmd = [ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", "http://127.0.0.1:%d" % SERVER.port,
               "--warmup-s", "0.5", "--window-s", "1", "--duration-s", duration, "--output", out, *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("p99 us", proc.stdout)
        with open(out) as f:
            return json.load(f)

    def test_closed_loop_report(self):
        rep = self.run_bench("--concurrency", "1,4", "--protocol", "v2-binary")
        self.assertGreater(rep["machine"]["cores"], 0)
        self.assertTrue(rep["machine"]["cpu_model"])
        self.assertEqual([r["load"] for r in rep["rows"]], [1, 4])
        for r in rep["rows"]:
            self.assertEqual(r["mode"], "concurrency")
            self.assertEqual(r["errors"], 0)
            self.assertGreater(r["requests"], 0)
            self.assertAlmostEqual(r["requests_per_s"], r["requests"] / r["duration_s"], places=3)
            self.assertLessEqual(r["p50_us"], r["p90_us"])
            self.assertLessEqual(r["p90_us"], r["p95_us"])
            self.assertLessEqual(r["p95_us"], r["p99_us"])
            self.assertLessEqual(r["p99_us"], r["max_us"])
            self.assertEqual(r["windows"], 2)
            # The server-side breakdown comes from the statistics endpoint.
            self.assertIsNotNone(r["server"])
            self.assertGreater(r["server"]["compute_infer_us"], 0)
            self.assertGreaterEqual(r["server"]["avg_batch_rows"], 1)

    def test_open_loop_and_csv(self):
        rep = self.run_bench("--request-rate", "200", "--protocol", "v1")
        r = rep["rows"][0]
        self.assertEqual(r["mode"], "rate")
        self.assertEqual(r["errors"], 0)
        # Poisson arrivals at 200/s for 2 s: about 400 requests (the seeded schedule
        # has 5 sigma ~ 100; the lower bound also allows a slow sanitizer build).
        self.assertGreater(r["requests"], 250)
        self.assertLess(r["requests"], 500)
        out = os.path.join(ARGS.workdir, "bench_report.csv")
        proc = subprocess.run([ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", "http://127.0.0.1:%d" % SERVER.port,
                               "--warmup-s", "0.2", "--window-s", "0.5", "--duration-s", "0.5", "--output", out],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            header, row = f.read().splitlines()[:2]
        self.assertTrue(header.startswith("label,mode,load,protocol,batch_size,requests_per_s"))
        self.assertEqual(len(header.split(",")), len(row.split(",")))

    def test_in_process_baseline(self):
        out = os.path.join(ARGS.workdir, "bench_inproc.json")
        proc = subprocess.run([ARGS.inferd, "bench", "--in-process", "--model-repository", REPO, "-m", "tiny_mlp",
                               "--batch-sizes", "1,4", "--warmup-s", "0.2", "--window-s", "0.5", "--output", out],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            rows = json.load(f)["rows"]
        self.assertEqual([r["batch_size"] for r in rows], [1, 4])
        for r in rows:
            self.assertEqual(r["mode"], "in-process")
            self.assertGreater(r["requests"], 0)

    def test_grpc_protocol(self):
        rep = self.run_bench("--protocol", "grpc", "--grpc-url", "127.0.0.1:%d" % SERVER.grpc_port,
                             "--concurrency", "2")
        r = rep["rows"][0]
        self.assertEqual(r["protocol"], "grpc")
        self.assertEqual(r["errors"], 0)
        self.assertGreater(r["requests"], 0)
        self.assertGreater(r["server"]["compute_infer_us"], 0)  # the requests reached the model

    def test_duration_is_exact_and_formats_and_failures_are_reported(self):
        # --duration-s 1.5 with --window-s 1: two windows of 0.75 s, measuring exactly 1.5 s.
        rep = self.run_bench("--concurrency", "2", duration="1.5")
        r = rep["rows"][0]
        self.assertEqual(r["windows"], 2)
        self.assertAlmostEqual(r["duration_s"], 1.5, places=6)
        self.assertIn(r["stable"], (True, False))
        # The format follows --output-format when the file name does not say; a name that says nothing fails
        # before measuring.
        base = [ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", "http://127.0.0.1:%d" % SERVER.port,
                "--warmup-s", "0.1", "--window-s", "0.3", "--duration-s", "0.3"]
        out = os.path.join(ARGS.workdir, "bench_report.txt")
        proc = subprocess.run(base + ["--output", out], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("name it .json or .csv, or give --output-format", proc.stderr)
        proc = subprocess.run(base + ["--output", out, "--output-format", "csv"], capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            self.assertTrue(f.readline().startswith("label,mode,load"))
        # Every request failing (a wrong version) is a failed run, with the server's reason.
        proc = subprocess.run([ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", "http://127.0.0.1:%d" % SERVER.port,
                               "--metadata-url", "http://127.0.0.1:%d" % SERVER.port, "--protocol", "v2-json",
                               "--warmup-s", "0.1", "--window-s", "0.3", "--duration-s", "0.3",
                               "--input-data", self.bad_input_file()], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("no request succeeded", proc.stderr)
        self.assertIn("HTTP 400", proc.stderr)

    def bad_input_file(self):
        # The right input name with the wrong element count: every request is refused with 400.
        path = os.path.join(ARGS.workdir, "bench_bad_input.json")
        with open(path, "w") as f:
            json.dump({"data": [{"input": {"content": [1.0, 2.0, 3.0], "shape": [3]}}]}, f)
        return path

    def test_unknown_model_fails_cleanly(self):
        proc = subprocess.run([ARGS.inferd, "bench", "-m", "nope", "--url", "http://127.0.0.1:%d" % SERVER.port],
                              capture_output=True, text=True, timeout=30)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("404", proc.stderr)


class ExplicitControl(unittest.TestCase):
    def test_load_unload_over_http(self):
        server = ic.Server(ARGS.inferd, REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp")
        try:
            st, index = server.post_json("/v2/repository/index", {})
            states = {e["name"]: e["state"] for e in index}
            self.assertEqual(states["tiny_mlp"], "READY")
            self.assertEqual(states["mlp"], "UNAVAILABLE")
            x = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)
            st, js = server.post_json("/v2/models/mlp/infer", ic.v2_json_request({"x": x}))
            self.assertEqual(st, 503, js)
            self.assertEqual(server.request("GET", "/v2/models/mlp/ready")[0], 400)
            self.assertEqual(server.post_json("/v2/repository/models/mlp/load", {})[0], 200)
            st, js = server.post_json("/v2/models/mlp/infer", ic.v2_json_request({"x": x}))
            self.assertEqual(st, 200, js)
            np.testing.assert_allclose(np.array(js["outputs"][0]["data"]).reshape(2, 3), torch_ref("mlp", x), atol=TOL)
            self.assertEqual(server.post_json("/v2/repository/models/mlp/unload", {})[0], 200)
            self.assertEqual(server.post_json("/v2/models/mlp/infer", ic.v2_json_request({"x": x}))[0], 503)
            # Load with a replacement config (Triton's parameters.config): no batching this time.
            cfg = {"platform": "pytorch_libtorch", "max_batch_size": 0,
                   "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1, 8]}],
                   "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1, 3]}]}
            st, js = server.post_json("/v2/repository/models/mlp/load", {"parameters": {"config": json.dumps(cfg)}})
            self.assertEqual(st, 200, js)
            st, md = server.get_json("/v2/models/mlp")
            self.assertEqual(md["inputs"][0]["shape"], [-1, 8])
            st, js = server.post_json("/v2/repository/models/broken/load", {})
            self.assertEqual(st, 400)
            self.assertIn("max_batch_sise", js["error"])
            self.assertEqual(server.post_json("/v2/repository/models/ghost/load", {})[0], 404)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_load_unload_over_grpc(self):
        pb = stubs().pb
        server = ic.Server(ARGS.inferd, REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp")
        try:
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                stub = stubs().pb_grpc.GRPCInferenceServiceStub(ch)
                x = np.random.default_rng(6).standard_normal((2, 8)).astype(np.float32)
                infer = lambda: stub.ModelInfer(gc.infer_request(pb, "mlp", {"x": x}), timeout=60)  # noqa: E731
                with self.assertRaises(grpc.RpcError) as cm:
                    infer()
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
                self.assertFalse(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready)
                stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="mlp"), timeout=120)
                self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready)
                np.testing.assert_allclose(gc.outputs_of(infer())["y"], torch_ref("mlp", x), atol=TOL)
                stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp"), timeout=120)
                with self.assertRaises(grpc.RpcError) as cm:
                    infer()
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
                cfg = {"platform": "pytorch_libtorch", "max_batch_size": 0,
                       "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1, 8]}],
                       "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1, 3]}]}
                load = pb.RepositoryModelLoadRequest(model_name="mlp")
                load.parameters["config"].string_param = json.dumps(cfg)
                stub.RepositoryModelLoad(load, timeout=120)
                md = stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp"))
                self.assertEqual(list(md.inputs[0].shape), [-1, 8])
                errors = {}
                for name, param in (("broken", None), ("ghost", None), ("mlp", "file:1/model.pt")):
                    req = pb.RepositoryModelLoadRequest(model_name=name)
                    if param:
                        req.parameters[param].bytes_param = b"\0"
                    with self.assertRaises(grpc.RpcError) as cm:
                        stub.RepositoryModelLoad(req, timeout=120)
                    errors[name] = (cm.exception.code(), cm.exception.details())
                self.assertEqual(errors["broken"][0], grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("max_batch_sise", errors["broken"][1])
                self.assertEqual(errors["ghost"][0], grpc.StatusCode.NOT_FOUND)
                self.assertEqual(errors["mlp"][0], grpc.StatusCode.UNIMPLEMENTED)
        finally:
            self.assertEqual(server.stop(), 0)


    def test_exit_on_error_and_the_startup_summary(self):
        # The fixture repository has a broken model: with --exit-on-error the server refuses to start.
        out = subprocess.run([ARGS.inferd, "serve", "--model-repository", REPO, "--http-port", "0", "--grpc-port", "0",
                              "--metrics-port", "0", "--control-state-dir", ic.state_dir(REPO),
                              "--exit-on-error", "true"], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("models failed to load and --exit-on-error is set", out.stderr)
        self.assertIn("broken: ", out.stderr)
        self.assertIn("max_batch_sise", out.stderr)
        # Started with only good models, it serves; the summary names every model, its state and backend.
        server = ic.Server(ARGS.inferd, REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--exit-on-error", "true")
        try:
            log = "".join(server.log)
            self.assertRegex(log, r"model tiny_mlp READY versions \[1\] backend pytorch loaded in [0-9.]+ s")
            self.assertRegex(log, r"model mlp UNAVAILABLE versions \[\] backend - .*: unloaded")
            self.assertRegex(log, r"models in .*repository: 1 READY, \d+ UNAVAILABLE")
        finally:
            self.assertEqual(server.stop(), 0)


    def test_management_routes_need_the_bearer_token(self):
        token_file = os.path.join(ARGS.workdir, "admin_token")
        with open(token_file, "w") as f:
            f.write("s3cret-token\n")
        server = ic.Server(ARGS.inferd, REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--admin-token-file", token_file)
        x = np.ones((1, 16), np.float32)
        good = {"Authorization": "Bearer s3cret-token"}
        try:
            # Management without (or with a wrong) token: 401 with WWW-Authenticate; nothing happens.
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                st, hdrs, body = server.request("POST", "/v2/repository/models/mlp/load", b"{}", headers)
                self.assertEqual(st, 401, body)
                self.assertEqual(hdrs.get("www-authenticate"), "Bearer")
                self.assertIn("bearer token", json.loads(body)["error"])
            self.assertEqual(server.request("GET", "/v2/repository/models")[0], 401)
            self.assertEqual(server.request("GET", "/v2/models/mlp/ready")[0], 400)  # still not loaded
            st, _, body = server.request("POST", "/v2/repository/models/mlp/load", b"{}", good)
            self.assertEqual(st, 200, body)
            self.assertEqual(server.request("GET", "/v2/repository/models", headers=good)[0], 200)
            # Inference, metadata and health need no token.
            self.assertEqual(server.post_json("/v2/models/tiny_mlp/infer", ic.v2_json_request({"input": x}))[0], 200)
            self.assertEqual(server.request("GET", "/v2/health/ready")[0], 200)
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                pb = stubs().pb
                stub = stubs().pb_grpc.GRPCInferenceServiceStub(ch)
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp"), timeout=60)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=60,
                                     metadata=(("authorization", "Bearer s3cret-token"),))
                self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name="mlp"), timeout=60).ready)
        finally:
            self.assertEqual(server.stop(), 0)
        # --auth-all-routes: inference and health need it too, over HTTP and gRPC.
        server = ic.Server(ARGS.inferd, REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--admin-token-file", token_file, "--auth-all-routes", "true")
        try:
            body = json.dumps(ic.v2_json_request({"input": x})).encode()
            self.assertEqual(server.request("POST", "/v2/models/tiny_mlp/infer", body)[0], 401)
            self.assertEqual(server.request("POST", "/v2/models/tiny_mlp/infer", body, good)[0], 200)
            self.assertEqual(server.request("GET", "/v2/health/live")[0], 401)
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                pb = stubs().pb
                stub = stubs().pb_grpc.GRPCInferenceServiceStub(ch)
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.ServerLive(pb.ServerLiveRequest(), timeout=60)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                self.assertTrue(stub.ServerLive(pb.ServerLiveRequest(), timeout=60,
                                                metadata=(("authorization", "Bearer s3cret-token"),)).live)
        finally:
            self.assertEqual(server.stop(), 0)
        # The token never comes from the command line; a missing variable stops the start.
        out = subprocess.run([ARGS.inferd, "serve", "--model-repository", REPO, "--admin-token-env", "INFERD_NO_SUCH"],
                             capture_output=True, text=True, timeout=120, env={"PATH": os.environ.get("PATH", "")})
        self.assertEqual(out.returncode, 2)
        self.assertIn("INFERD_NO_SUCH is not set", out.stderr)


LIFECYCLE_CONFIG = """platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }
model_warmup [ { name: "zeros" batch_size: 2 count: 3
  inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]
"""


class Lifecycle(unittest.TestCase):
    """Versions as snapshots: publish, failed load keeps the old, rollback, labels, swaps under load."""

    def setUp(self):
        self.repo = os.path.join(ARGS.workdir, "lifecycle_repo")
        ic.remove_repository(self.repo)
        os.makedirs(os.path.join(self.repo, "lc"))
        with open(os.path.join(self.repo, "lc", "config.pbtxt"), "w") as f:
            f.write(LIFECYCLE_CONFIG)
        self.publish(1)
        self.x = np.arange(8, dtype=np.float32).reshape(2, 4)

    def publish(self, k, broken=False):
        d = os.path.join(self.repo, "lc", str(k))
        os.makedirs(d, exist_ok=True)
        if broken:
            with open(os.path.join(d, "model.pt"), "w") as f:
                f.write("not a TorchScript file")
        else:
            torch.jit.script(make_fixtures.Scale(float(k))).save(os.path.join(d, "model.pt"))

    def answer(self, server, path="/v2/models/lc/infer"):
        st, js = server.post_json(path, ic.v2_json_request({"x": self.x}))
        self.assertEqual(st, 200, js)
        y = np.array(js["outputs"][0]["data"], np.float32).reshape(2, 4)
        k = y[1, 0] / self.x[1, 0]
        np.testing.assert_allclose(y, self.x * k, atol=TOL)
        return int(round(k)), js.get("model_version")

    def test_publish_fail_rollback_and_labels_survive_restart(self):
        server = ic.Server(ARGS.inferd, self.repo, "--model-control-mode", "explicit", "--load-model", "lc")
        try:
            self.assertEqual(self.answer(server), (1, "1"))
            self.publish(2)
            self.assertEqual(server.post_json("/v2/repository/models/lc/load", {})[0], 200)
            self.assertEqual(self.answer(server), (2, "2"))
            st, labels = server.get_json("/v2/repository/models/lc/labels")
            self.assertEqual((labels["default_version"], labels["history"]), ("2", ["1", "2"]))

            # A broken new version never replaces the serving one; the index says why.
            self.publish(3, broken=True)
            st, js = server.post_json("/v2/repository/models/lc/load", {})
            self.assertNotEqual(st, 200)
            self.assertIn("version 3", js["error"])
            self.assertEqual(self.answer(server), (2, "2"))
            st, index = server.post_json("/v2/repository/index", {})
            v3 = [e for e in index if e["name"] == "lc" and e.get("version") == "3"]
            self.assertEqual(v3[0]["state"], "UNAVAILABLE")
            self.assertIn("TorchScript", v3[0]["reason"])

            # One call: the previous default serves again, as `stable`.
            st, rb = server.post_json("/v2/repository/models/lc/rollback", {})
            self.assertEqual(st, 200, rb)
            self.assertEqual((rb["rolled_back_from"], rb["rolled_back_to"]), ("2", "1"))
            self.assertEqual(rb["labels"], {"stable": "1"})
            self.assertEqual(self.answer(server), (1, "1"))
            self.assertEqual(self.answer(server, "/v2/models/lc/labels/stable/infer"), (1, "1"))
            self.assertEqual(self.answer(server, "/v2/models/lc/versions/2/infer"), (2, "2"))
            st, js = server.post_json("/v1/models/lc/labels/stable:predict", {"instances": self.x.tolist()})
            self.assertEqual(st, 200, js)
            np.testing.assert_allclose(np.array(js["predictions"]), self.x, atol=TOL)
            self.assertEqual(server.post_json("/v2/models/lc/labels/nope/infer", {})[0], 404)
            st, js = server.post_json("/v2/repository/models/lc/rollback", {})
            self.assertEqual(st, 400, js)  # nothing older than version 1
            st, _, js = server.request("PUT", "/v2/repository/models/lc/labels/canary", json.dumps({"version": "2"}))
            self.assertEqual(st, 200, js)
            self.assertEqual(json.loads(js)["labels"], {"canary": "2", "stable": "1"})
            self.assertEqual(server.request("PUT", "/v2/repository/models/lc/labels/9x", b"{}")[0], 400)
            self.assertEqual(server.request("PUT", "/v2/repository/models/lc/labels/c2",
                                            json.dumps({"version": 42}))[0], 404)

            # The same rollback through the CLI, against the running server.
            st, _, js = server.request("PUT", "/v2/repository/models/lc/labels/stable", json.dumps({"version": 2}))
            self.assertEqual(st, 200, js)
            self.assertEqual(self.answer(server), (2, "2"))
            url = "http://127.0.0.1:%d" % server.port
            out = subprocess.run([ARGS.inferd, "rollback", "lc", "--url", url], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("rolled back from version 2 to version 1", out.stdout)
            self.assertEqual(self.answer(server), (1, "1"))
            out = subprocess.run([ARGS.inferd, "rollback", "lc", "--url", url], capture_output=True, text=True)
            self.assertEqual(out.returncode, 1)  # nothing older: the server's reason is printed
            self.assertIn("no earlier default version", out.stderr)
            out = subprocess.run([ARGS.inferd, "rollback", "nope", "--url", url], capture_output=True, text=True)
            self.assertEqual(out.returncode, 1)
            self.assertIn("HTTP 404", out.stderr)
            out = subprocess.run([ARGS.inferd, "models", "--url", url], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            row = [line.split() for line in out.stdout.splitlines() if line.startswith("lc ")][0]
            self.assertEqual(row[:5], ["lc", "READY", "1", "1,2", "failed:3"])
            self.assertIn("canary=2", row)
            self.assertIn("stable=1", row)
            out = subprocess.run([ARGS.inferd, "models", "lc", "nope", "--url", url], capture_output=True, text=True)
            self.assertEqual(out.returncode, 1)
            self.assertIn("no model 'nope' on " + url, out.stderr)
            st, listing = server.get_json("/v2/repository/models")
            self.assertEqual(st, 200)
            lc = [m for m in listing["models"] if m["name"] == "lc"][0]
            self.assertGreater(lc["resident_bytes"], 0)
            self.assertEqual([v["state"] for v in lc["versions"]], ["READY", "READY", "UNAVAILABLE"])
        finally:
            self.assertEqual(server.stop(), 0)
        # Labels live in the control-state directory, not in the (read-only) repository: a restarted
        # server keeps serving the rolled-back version.
        with open(os.path.join(ic.state_dir(self.repo), "lc", "labels.json")) as f:
            self.assertEqual(json.load(f)["labels"], {"stable": 1, "canary": 2})
        self.assertFalse(os.path.exists(os.path.join(self.repo, "lc", "version_labels.json")))
        server = ic.Server(ARGS.inferd, self.repo, "--model-control-mode", "explicit", "--load-model", "lc")
        try:
            self.assertEqual(self.answer(server), (1, "1"))
            self.assertEqual(self.answer(server, "/v2/models/lc/labels/canary/infer"), (2, "2"))
        finally:
            self.assertEqual(server.stop(), 0)

    def test_swaps_under_concurrent_requests_lose_nothing(self):
        server = ic.Server(ARGS.inferd, self.repo, "--model-control-mode", "explicit", "--load-model", "lc")
        stop = threading.Event()
        failures, seen = [], set()

        def client():
            conn = server.conn()
            while not stop.is_set():
                st, js = server.post_json("/v2/models/lc/infer", ic.v2_json_request({"x": self.x}), conn=conn)
                if st != 200:
                    failures.append((st, js))
                    continue
                y = np.array(js["outputs"][0]["data"], np.float32).reshape(2, 4)
                k = y[1, 0] / self.x[1, 0]
                if not np.allclose(y, self.x * k, atol=TOL) or str(int(round(k))) != js["model_version"]:
                    failures.append(("wrong answer", js))
                seen.add(int(round(k)))
            conn.close()

        try:
            threads = [threading.Thread(target=client) for _ in range(4)]
            for t in threads:
                t.start()
            for k in range(2, 12):  # publish then move `stable`, alternating with rollbacks
                self.publish(k)
                st, _, js = server.request("PUT", "/v2/repository/models/lc/labels/stable",
                                           json.dumps({"version": k}))
                self.assertEqual(st, 200, js)
                if k % 3 == 0:
                    st, js = server.post_json("/v2/repository/models/lc/rollback", {})
                    self.assertEqual(st, 200, js)
            stop.set()
            for t in threads:
                t.join()
            self.assertEqual(failures, [])
            self.assertGreater(len(seen), 1)
        finally:
            stop.set()
            self.assertEqual(server.stop(), 0)


def metric(text, name):
    """The value of an unlabelled sample in a Prometheus exposition."""
    m = re.search(r"^%s ([0-9.e+]+)$" % re.escape(name), text, re.M)
    if not m:
        raise AssertionError("no metric " + name)
    return float(m.group(1))


class Residency(unittest.TestCase):
    """On-demand residency: a few hundred generated models under a small memory budget."""

    N = 240

    @classmethod
    def setUpClass(cls):
        cls.repo = os.path.join(ARGS.workdir, "tenants_repo")
        ic.remove_repository(cls.repo)
        subprocess.check_call([sys.executable, os.path.join(ROOT, "bench", "make_tenant_models.py"), cls.repo,
                               str(cls.N)])
        # One pinned model: loaded at start, never evicted.
        with open(os.path.join(cls.repo, "tenant_00000", "config.pbtxt"), "a") as f:
            f.write('parameters { key: "pinned" value: { string_value: "true" } }\n')
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        import make_tenant_models as mtm
        cls.mtm = mtm
        cls.x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
        cls.expected = {}
        module = mtm.Small(0).eval()
        for i in range(cls.N):
            mtm.tenant_weights(module, i)
            with torch.no_grad():
                cls.expected[mtm.model_name("tenant_", i)] = module(torch.from_numpy(cls.x)).numpy()

    def check(self, server, name, conn=None):
        st, js = server.post_json("/v2/models/%s/infer" % name, ic.v2_json_request({"x": self.x}), conn=conn)
        if st != 200:
            return "%s: HTTP %d %s" % (name, st, js)
        if js["model_name"] != name:
            return "%s answered as %s" % (name, js["model_name"])
        y = np.array(js["outputs"][0]["data"], np.float32).reshape(2, 4)
        if not np.allclose(y, self.expected[name], atol=TOL):
            return "%s: wrong answer" % name
        return None

    def test_many_models_under_a_small_budget(self):
        budget = 4 << 20  # holds roughly 25 of these models (~140 KiB each, measured)
        server = ic.Server(ARGS.inferd, self.repo, "--model-residency", "on-demand", "--memory-budget", "4MiB",
                           "--model-min-residency-secs", "0", "--model-load-threads", "2")
        try:
            names = [self.mtm.model_name("tenant_", i) for i in range(self.N)]
            st, index = server.post_json("/v2/repository/index", {})
            ready = [e["name"] for e in index if e.get("state") == "READY"]
            self.assertEqual(ready, ["tenant_00000"])  # only the pinned model loaded at start
            self.assertEqual(len(index), self.N)
            # Not resident is still ready: a request loads it.
            self.assertEqual(server.request("GET", "/v2/models/tenant_00007/ready")[0], 200)

            failures = []
            order = [names[(i * 7) % self.N] for i in range(self.N)] * 2

            def client(part):
                conn = server.conn()
                for name in part:
                    err = self.check(server, name, conn)
                    if err:
                        failures.append(err)
                conn.close()

            threads = [threading.Thread(target=client, args=(order[k::4],)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(failures, [])

            # One more model, with nothing else in flight: the budget holds again afterwards.
            self.assertIsNone(self.check(server, names[1]))
            text = server.metrics()
            self.assertGreater(metric(text, "inferd_model_evictions_total"), 0)
            self.assertGreaterEqual(metric(text, "inferd_model_cold_starts_total"), self.N)
            self.assertLessEqual(metric(text, "inferd_memory_budget_used_bytes"), budget)
            self.assertEqual(metric(text, "inferd_memory_budget_bytes"), budget)
            self.assertEqual(metric(text, "inferd_models_registered"), self.N)
            self.assertLess(metric(text, "inferd_models_loaded"), self.N)
            self.assertGreater(metric(text, "inferd_model_load_duration_seconds_count"), self.N)
            self.assertGreater(metric(text, "inferd_model_eviction_age_seconds_count"), 0)

            st, listing = server.get_json("/v2/repository/models")
            by_name = {m["name"]: m for m in listing["models"]}
            self.assertTrue(by_name["tenant_00000"]["pinned"])
            self.assertEqual(by_name["tenant_00000"]["state"], "READY")  # never evicted
            evicted = [m for m in listing["models"] if m["reason"].startswith("evicted")]
            self.assertGreater(len(evicted), 0)
            self.assertEqual(listing["resident_bytes"], sum(m["resident_bytes"] for m in listing["models"]))
            # An evicted model answers again (and correctly) on its next request.
            self.assertIsNone(self.check(server, evicted[0]["name"]))
        finally:
            self.assertEqual(server.stop(), 0)

    def test_budget_needs_on_demand_and_valid_units(self):
        for extra, why in ((["--memory-budget", "1GiB"], "needs --model-residency on-demand"),
                           (["--model-residency", "on-demand", "--memory-budget", "12XB"], "invalid byte size")):
            out = subprocess.run([ARGS.inferd, "serve", "--model-repository", self.repo, "--http-port", "0",
                                  "--metrics-port", "0", *extra], capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn(why, out.stderr)

    def test_size_override_and_unknown_model(self):
        repo = os.path.join(ARGS.workdir, "tenants_override")
        ic.remove_repository(repo)
        subprocess.check_call([sys.executable, os.path.join(ROOT, "bench", "make_tenant_models.py"), repo, "3"])
        with open(os.path.join(repo, "tenant_00001", "config.pbtxt"), "a") as f:
            f.write('parameters { key: "memory_bytes" value: { string_value: "3MiB" } }\n')
        with open(os.path.join(repo, "tenant_00002", "config.pbtxt"), "a") as f:
            f.write('parameters { key: "memory_bytes" value: { string_value: "lots" } }\n')
        server = ic.Server(ARGS.inferd, repo, "--model-residency", "on-demand", "--memory-budget", "8MiB",
                           "--model-min-residency-secs", "0")
        try:
            self.assertIsNone(self.check(server, "tenant_00000"))
            self.assertIsNone(self.check(server, "tenant_00001"))  # 3 MiB declared: fits next to tenant_00000
            st, listing = server.get_json("/v2/repository/models")
            by_name = {m["name"]: m for m in listing["models"]}
            self.assertEqual(by_name["tenant_00001"]["resident_bytes"], 3 << 20)
            self.assertEqual(by_name["tenant_00001"]["versions"][0]["size_source"], "config")
            # Measured with jemalloc's counters; builds without jemalloc (sanitizers) fall back to file sizes.
            linked = subprocess.run(["ldd", ARGS.inferd], capture_output=True, text=True).stdout
            self.assertEqual(by_name["tenant_00000"]["versions"][0]["size_source"],
                             "measured" if "libjemalloc" in linked else "files")
            st, js = server.post_json("/v2/models/tenant_00002/infer", ic.v2_json_request({"x": self.x}))
            self.assertEqual(st, 503, js)
            self.assertIn("memory_bytes", js["error"])
            # A model whose load failed is not ready (until its files change).
            self.assertEqual(server.request("GET", "/v2/models/tenant_00002/ready")[0], 400)
            st, js = server.post_json("/v2/models/nope/infer", ic.v2_json_request({"x": self.x}))
            self.assertEqual(st, 404, js)
        finally:
            self.assertEqual(server.stop(), 0)


class Shutdown(unittest.TestCase):
    def test_sigterm_finishes_in_flight_requests(self):
        server = ic.Server(ARGS.inferd, REPO)
        try:
            result = {}
            x = {"x": np.ones((1, 256), np.float32)}

            def send():
                result["r"] = server.post_json("/v2/models/slow/infer", ic.v2_json_request(x))

            t = threading.Thread(target=send)
            t.start()
            # Wait until the server holds the request (its own pending gauge), then stop it.
            while 'nv_inference_pending_request_count{model="slow",version="1"} 1' not in server.metrics():
                self.assertTrue(t.is_alive())
            server.proc.send_signal(signal.SIGTERM)
            t.join(60)
            self.assertEqual(result["r"][0], 200, result)
            self.assertEqual(server.proc.wait(60), 0)
        finally:
            server.stop()

    def test_sigterm_ends_grpc_streams_after_their_answers(self):
        pb = stubs().pb
        server = ic.Server(ARGS.inferd, REPO)
        try:
            ch = grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port)
            stub = stubs().pb_grpc.GRPCInferenceServiceStub(ch)
            x = np.ones((1, 256), np.float32)
            sent = threading.Event()

            def requests():
                yield gc.infer_request(pb, "slow", {"x": x}, id="slow-1")
                sent.wait(60)  # the client keeps its side of the stream open

            stream = stub.ModelStreamInfer(requests(), timeout=120)
            idle = stub.ModelStreamInfer(iter(lambda: sent.wait(60), True), timeout=120)  # open, no requests
            while 'nv_inference_pending_request_count{model="slow",version="1"} 1' not in server.metrics():
                pass
            server.proc.send_signal(signal.SIGTERM)
            answers = list(stream)  # ends OK once its accepted request is answered
            self.assertEqual([a.infer_response.id for a in answers], ["slow-1"])
            self.assertEqual(answers[0].error_message, "")
            self.assertEqual(list(idle), [])
            self.assertEqual(server.proc.wait(60), 0)
            sent.set()
            ch.close()
        finally:
            server.stop()


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--inferd", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--reuse-repository", action="store_true",
                        help="use WORKDIR/repository as it is (made by make_fixtures.py)")
    ARGS, rest = parser.parse_known_args()
    os.makedirs(ARGS.workdir, exist_ok=True)
    prog = unittest.main(module=__name__, argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    r = prog.result
    failed = len(r.failures) + len(r.errors)
    print("%d passed, %d failed, %d skipped" % (r.testsRun - failed - len(r.skipped), failed, len(r.skipped)))
    sys.exit(0 if r.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
