"""Integration suite: explicit_control (run by run_tests.py)."""
import json
import os
import subprocess
import sys
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401


class ExplicitControl(unittest.TestCase):
    def test_load_unload_over_http(self):
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp")
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
            np.testing.assert_allclose(np.array(js["outputs"][0]["data"]).reshape(2, 3), C.torch_ref("mlp", x), atol=C.TOL)
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
        pb = C.stubs().pb
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp")
        try:
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
                x = np.random.default_rng(6).standard_normal((2, 8)).astype(np.float32)
                infer = lambda: stub.ModelInfer(gc.infer_request(pb, "mlp", {"x": x}), timeout=60)  # noqa: E731
                with self.assertRaises(grpc.RpcError) as cm:
                    infer()
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
                self.assertFalse(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready)
                stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="mlp"), timeout=120)
                self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready)
                np.testing.assert_allclose(gc.outputs_of(infer())["y"], C.torch_ref("mlp", x), atol=C.TOL)
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
        # A repository with a broken model: with --exit-on-error the server refuses to start.
        repo = C.served_repository("exit_on_error", ["broken", "mlp", "tiny_mlp"])
        out = subprocess.run([C.ARGS.inferd, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                              "--metrics-port", "0", "--control-state-dir", ic.state_dir(repo),
                              "--exit-on-error", "true"], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("models failed to load and --exit-on-error is set", out.stderr)
        self.assertIn("broken: ", out.stderr)
        self.assertIn("max_batch_sise", out.stderr)
        # Started with only good models, it serves; the summary names every model, its state and backend.
        server = ic.Server(C.ARGS.inferd, repo, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--exit-on-error", "true")
        try:
            log = "".join(server.log)
            self.assertRegex(log, r"model tiny_mlp READY versions \[1\] backend pytorch loaded in [0-9.]+ s")
            self.assertRegex(log, r"model mlp UNAVAILABLE versions \[\] backend - .*: unloaded")
            self.assertRegex(log, r"models in .*repository: 1 READY, \d+ UNAVAILABLE")
        finally:
            self.assertEqual(server.stop(), 0)


    def test_management_routes_need_the_bearer_token(self):
        token_file = os.path.join(C.ARGS.workdir, "admin_token")
        with open(token_file, "w") as f:
            f.write("s3cret-token\n")
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
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
                pb = C.stubs().pb
                stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp"), timeout=60)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=60,
                                     metadata=(("authorization", "Bearer s3cret-token"),))
                # inferd's management service (traffic, rollouts) needs the token too.
                mg = C.stubs().management_grpc.ManagementServiceStub(ch)
                req = C.stubs().management.JsonRequest(model_name="tiny_mlp", json='{"split": {"1": 100}}')
                with self.assertRaises(grpc.RpcError) as cm:
                    mg.SetTraffic(req, timeout=60)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                got = mg.SetTraffic(req, timeout=60, metadata=(("authorization", "Bearer s3cret-token"),))
                self.assertEqual(json.loads(got.json)["source"], "runtime")
                got = mg.ClearTraffic(C.stubs().management.ModelRequest(model_name="tiny_mlp"), timeout=60,
                                      metadata=(("authorization", "Bearer s3cret-token"),))  # the state is shared
                self.assertEqual(json.loads(got.json)["source"], "none")
                self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name="mlp"), timeout=60).ready)
        finally:
            self.assertEqual(server.stop(), 0)
        # --auth-all-routes: inference and health need it too, over HTTP and gRPC.
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--admin-token-file", token_file, "--auth-all-routes", "true")
        try:
            body = json.dumps(ic.v2_json_request({"input": x})).encode()
            self.assertEqual(server.request("POST", "/v2/models/tiny_mlp/infer", body)[0], 401)
            self.assertEqual(server.request("POST", "/v2/models/tiny_mlp/infer", body, good)[0], 200)
            self.assertEqual(server.request("GET", "/v2/health/live")[0], 401)
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                pb = C.stubs().pb
                stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.ServerLive(pb.ServerLiveRequest(), timeout=60)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                self.assertTrue(stub.ServerLive(pb.ServerLiveRequest(), timeout=60,
                                                metadata=(("authorization", "Bearer s3cret-token"),)).live)
        finally:
            self.assertEqual(server.stop(), 0)
        # The token never comes from the command line; a missing variable stops the start.
        out = subprocess.run([C.ARGS.inferd, "serve", "--model-repository", C.REPO, "--admin-token-env", "INFERD_NO_SUCH"],
                             capture_output=True, text=True, timeout=120, env={"PATH": os.environ.get("PATH", "")})
        self.assertEqual(out.returncode, 2)
        self.assertIn("INFERD_NO_SUCH is not set", out.stderr)
