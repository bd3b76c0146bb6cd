"""Integration suite: grpc (run by run_tests.py)."""
import json
import re
import os
import subprocess
import sys
import threading
import unittest

import grpc
import numpy as np
import torch
from google.protobuf import json_format

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

# The fixture models the shared server (C.SERVER) serves.
setUpModule = C.serving("broken", "dtypes", "echo_bytes", "held", "held_ctl", "mlp", "multi_io", "resnet18",
                        "tiny_mlp")


class Grpc(unittest.TestCase):
    """The KServe v2 gRPC API, driven by python3-grpcio like any client library."""

    @classmethod
    def setUpClass(cls):
        cls.s = C.stubs()
        cls.pb = cls.s.pb
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port)
        cls.stub = cls.s.pb_grpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def infer(self, model, inputs, **kw):
        return self.stub.ModelInfer(gc.infer_request(self.pb, model, inputs, **kw), timeout=120)

    def assert_still_serving(self):
        x = np.arange(16, dtype=np.float32).reshape(1, 16)
        out = gc.outputs_of(self.infer("tiny_mlp", {"input": x}))
        np.testing.assert_allclose(out["output"], C.torch_ref("tiny_mlp", x), atol=C.TOL)

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
        st, hdrs, data = C.SERVER.request("POST", "/v2/models/%s/infer" % model, body,
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
        st, http_md = C.SERVER.get_json("/v2")
        self.assertEqual((md.name, md.version, list(md.extensions)),
                         (http_md["name"], http_md["version"], http_md["extensions"]))
        for model in ("resnet18", "dtypes", "echo_bytes", "multi_io"):
            md = self.stub.ModelMetadata(pb.ModelMetadataRequest(name=model))
            st, want = C.SERVER.get_json("/v2/models/" + model)
            got = json_format.MessageToDict(md, preserving_proto_field_name=True)
            for t in got["inputs"] + got["outputs"]:
                t["shape"] = [int(d) for d in t["shape"]]  # int64 is a string in proto JSON
            self.assertEqual(got, want, model)
            cfg = self.stub.ModelConfig(pb.ModelConfigRequest(name=model)).config
            st, http_cfg = C.SERVER.get_json("/v2/models/%s/config" % model)
            self.assertEqual(cfg, json_format.Parse(json.dumps(http_cfg), self.s.config.ModelConfig()), model)
        self.assertEqual(self.stub.ModelConfig(pb.ModelConfigRequest(name="resnet18")).config.max_batch_size, 8)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="mlp", version="1")).ready)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="x")).ready)  # Triton: not ready, no error
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="mlp", version="9")).ready)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="broken")).ready)
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND,
                              lambda: self.stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp", version="9")))

        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest())
        st, http_index = C.SERVER.post_json("/v2/repository/index", {})
        self.assertEqual({m.name: (m.version, m.state, m.reason) for m in index.models},
                         {e["name"]: (e.get("version", ""), e["state"], e["reason"]) for e in http_index})
        ready = self.stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True))
        self.assertNotIn("broken", [m.name for m in ready.models])
        self.assertIn("mlp", [m.name for m in ready.models])
        self.assert_rpc_error(grpc.StatusCode.FAILED_PRECONDITION,
                              lambda: self.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp")),
                              text="explicit")

        st, before = C.SERVER.get_json("/v2/models/mlp/versions/1/stats")
        x = np.ones((2, 8), np.float32)
        self.infer("mlp", {"x": x})
        stats = self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="mlp", version="1")).model_stats
        st, http_stats = C.SERVER.get_json("/v2/models/mlp/versions/1/stats")
        want = http_stats["model_stats"][0]
        self.assertEqual((stats[0].name, stats[0].version), ("mlp", "1"))
        self.assertEqual(stats[0].inference_count, want["inference_count"])
        self.assertEqual(stats[0].execution_count, want["execution_count"])
        self.assertEqual(stats[0].inference_stats.success.count, want["inference_stats"]["success"]["count"])
        self.assertEqual(stats[0].inference_stats.success.ns, want["inference_stats"]["success"]["ns"])
        self.assertEqual(stats[0].inference_count, before["model_stats"][0]["inference_count"] + 2)
        self.assertEqual([b.batch_size for b in stats[0].batch_stats], [b["batch_size"] for b in want["batch_stats"]])
        every = self.stub.ModelStatistics(pb.ModelStatisticsRequest()).model_stats
        self.assertIn("tiny_mlp", [m.name for m in every])

    def test_infer_raw_and_typed_match_pytorch_and_http(self):
        x = np.random.default_rng(11).standard_normal((3, 16)).astype(np.float32)
        want = C.torch_ref("tiny_mlp", x)
        http = self.http_binary("tiny_mlp", {"input": x})["output"]
        raw = self.infer("tiny_mlp", {"input": x}, id="req-7")
        self.assertEqual((raw.model_name, raw.model_version, raw.id), ("tiny_mlp", "1", "req-7"))
        self.assertEqual(len(raw.raw_output_contents), 1)  # raw in, raw out
        np.testing.assert_allclose(gc.outputs_of(raw)["output"], want, atol=C.TOL)
        np.testing.assert_array_equal(gc.outputs_of(raw)["output"], http)  # the same bits as HTTP
        typed = self.infer("tiny_mlp", {"input": x}, raw=False)
        self.assertEqual(len(typed.raw_output_contents), 0)  # typed in, typed out
        self.assertEqual(list(typed.outputs[0].shape), [3, 4])
        np.testing.assert_array_equal(gc.outputs_of(typed)["output"], http)

        img = np.random.default_rng(12).standard_normal((1, 3, 224, 224)).astype(np.float32)
        out = gc.outputs_of(self.infer("resnet18", {"image": img}))["logits"]
        np.testing.assert_allclose(out, C.torch_ref("resnet18", img), atol=1e-4)
        np.testing.assert_array_equal(out, self.http_binary("resnet18", {"image": img})["logits"])

        # Only the requested output comes back; a version can be named.
        a, b = np.arange(8, dtype=np.float32).reshape(2, 4), np.full((2, 4), 3, np.float32)
        resp = self.infer("multi_io", {"INPUT__0": a, "INPUT__1": b}, outputs=["OUTPUT__1"], version="1")
        self.assertEqual([o.name for o in resp.outputs], ["OUTPUT__1"])
        np.testing.assert_allclose(gc.outputs_of(resp)["OUTPUT__1"], C.torch_ref("multi_io", a, b)[1], atol=C.TOL)

    def test_every_datatype_raw_and_typed(self):
        ins = C.DTYPE_INPUTS
        want = C.torch_ref("dtypes", *ins.values())
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
        mlp = C.module("mlp")
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
                np.testing.assert_allclose(got[str(k)], mlp(torch.from_numpy(x)).numpy(), atol=C.TOL, err_msg=str(k))

    def held(self, value, id=""):
        return gc.infer_request(self.pb, "held", {"x": np.array([[value]], np.float32)}, id=id)

    def test_cancelled_calls_and_passed_deadlines_never_run(self):
        before = C.held_counts()
        gone_before = C.client_cancellations()
        try:
            busy = self.stub.ModelInfer.future(self.held(7, "busy"), timeout=300)
            C.wait_held_at_gate(self, 1, busy)
            # A call whose deadline passes while it waits in the queue.
            with self.assertRaises(grpc.RpcError) as cm:
                self.stub.ModelInfer(self.held(0, "late"), timeout=0.5)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
            # A call the client cancels, and a stream cancelled with two requests queued.
            gone = self.stub.ModelInfer.future(self.held(0, "gone"), timeout=300)
            hold = threading.Event()

            def stream_requests():
                yield self.held(0, "s1")
                yield self.held(0, "s2")
                hold.wait(300)

            stream = self.stub.ModelStreamInfer(stream_requests(), timeout=300)
            C.wait_held_pending(self, 5, busy)
            gone.cancel()
            stream.cancel()
            hold.set()
            # late, gone and the stream: seen by the server before the busy request finishes.
            C.wait_until(self, "the server to see 3 cancellations",
                         lambda: C.client_cancellations() == gone_before + 3, busy)
            C.gate(1)
            out = gc.outputs_of(busy.result(timeout=60))
            self.assertEqual(out["y"].tolist(), [[7]])
            C.wait_held_pending(self, 0)
        finally:
            C.gate(0)
        after = C.held_counts()
        self.assertEqual(after["exec"] - before["exec"], 1)  # only the busy request ran
        self.assertEqual(after["inferences"] - before["inferences"], 1)
        self.assertEqual(after["cancelled"] - before["cancelled"], 4)
        self.assertTrue(gone.cancelled())
        self.assert_still_serving()

    def test_thousands_of_concurrent_calls_need_no_thread_each(self):
        def threads():
            with open("/proc/%d/status" % C.SERVER.proc.pid) as f:
                return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))

        n = 1000
        try:
            busy = self.stub.ModelInfer.future(self.held(7, "busy"), timeout=300)
            C.wait_held_at_gate(self, 1, busy)
            idle_threads = threads()
            calls = [self.stub.ModelInfer.future(self.held(k % 7, str(k)), timeout=300) for k in range(n)]
            C.wait_held_pending(self, 1 + n, busy)  # every call is held by the server at once
            held_threads = threads()
            self.assertLess(held_threads - idle_threads, 16, (idle_threads, held_threads))
            C.gate(1)
            busy.result(timeout=60)
            for k, call in enumerate(calls):
                r = call.result(timeout=60)
                self.assertEqual(r.id, str(k))
                self.assertEqual(gc.outputs_of(r)["y"].tolist(), [[k % 7]])
        finally:
            C.gate(0)

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
        out = subprocess.run([C.ARGS.inferd, "serve", "--model-repository", C.SERVED, "--http-port", "0",
                              "--metrics-port", "0", "--host", "127.0.0.1", "--grpc-port", str(C.SERVER.grpc_port)],
                             capture_output=True, text=True, timeout=180)
        self.assertEqual(out.returncode, 1, out.stderr[-3000:])
        self.assertIn("gRPC: cannot listen on 127.0.0.1:%d" % C.SERVER.grpc_port, out.stderr)
        self.assert_still_serving()

    def test_both_http2_servers_serve_the_same_api(self):
        # The default: inferd's own HTTP/2 on the plain port (ModelInfer served by it, the rest relayed in the
        # process); --grpc-own-http2 false: gRPC's server listens itself. Same answers, health and streams.
        self.assertTrue(any("gRPC service listening" in line and "(inferd's HTTP/2)" in line
                            for line in C.SERVER.log), "no start line naming inferd's HTTP/2")
        server = ic.Server(C.ARGS.inferd, C.SERVED, "--grpc-own-http2", "false")
        try:
            self.assertTrue(any("gRPC service listening" in line and "(gRPC's server)" in line
                                for line in server.log))
            x = np.arange(16, dtype=np.float32).reshape(1, 16)
            for port in (C.SERVER.grpc_port, server.grpc_port):
                with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
                    stub = self.s.pb_grpc.GRPCInferenceServiceStub(ch)
                    self.assertTrue(stub.ServerReady(self.pb.ServerReadyRequest(), timeout=60).ready)
                    r = stub.ModelInfer(gc.infer_request(self.pb, "tiny_mlp", {"input": x}, id="u"), timeout=60,
                                        metadata=(("x-any", "v"), ("x-any-bin", b"\0\1")))
                    self.assertEqual(r.id, "u")
                    np.testing.assert_allclose(gc.outputs_of(r)["output"], C.torch_ref("tiny_mlp", x), atol=C.TOL)
                    reqs = [gc.infer_request(self.pb, "tiny_mlp", {"input": x * k}, id=str(k)) for k in range(5)]
                    got = {a.infer_response.id: gc.outputs_of(a.infer_response)["output"]
                           for a in stub.ModelStreamInfer(iter(reqs), timeout=60)}
                    self.assertEqual(set(got), {str(k) for k in range(5)})
                    for k in range(5):
                        np.testing.assert_allclose(got[str(k)], C.torch_ref("tiny_mlp", x * k), atol=C.TOL)
                    health = self.s.health_grpc.HealthStub(ch)
                    self.assertEqual(health.Check(self.s.health.HealthCheckRequest(), timeout=60).status,
                                     self.s.health.HealthCheckResponse.SERVING)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_message_size_and_stream_flow_limits(self):
        server = ic.Server(C.ARGS.inferd, C.SERVED, "--grpc-max-message-bytes", "100000",
                           "--grpc-stream-max-in-flight", "1")
        try:
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                stub = self.s.pb_grpc.GRPCInferenceServiceStub(ch)
                big = np.zeros((1, 3, 224, 224), np.float32)  # 602 KB
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.ModelInfer(gc.infer_request(self.pb, "resnet18", {"image": big}), timeout=60)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                x = np.ones((1, 16), np.float32)
                out = gc.outputs_of(stub.ModelInfer(gc.infer_request(self.pb, "tiny_mlp", {"input": x}), timeout=60))
                np.testing.assert_allclose(out["output"], C.torch_ref("tiny_mlp", x), atol=C.TOL)
                # A stream that may have 1 request in flight pauses and resumes reading after each: all 60 are answered.
                xs = [np.full((1, 16), k, np.float32) for k in range(60)]
                reqs = (gc.infer_request(self.pb, "tiny_mlp", {"input": v}, id=str(k)) for k, v in enumerate(xs))
                got = {r.infer_response.id: gc.outputs_of(r.infer_response)["output"]
                       for r in stub.ModelStreamInfer(reqs, timeout=120)}
                self.assertEqual(set(got), {str(k) for k in range(60)})
                for k, v in enumerate(xs):
                    np.testing.assert_allclose(got[str(k)], C.torch_ref("tiny_mlp", v), atol=C.TOL)
        finally:
            self.assertEqual(server.stop(), 0)
