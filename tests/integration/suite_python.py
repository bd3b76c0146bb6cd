"""Integration suite: the Python backend (Triton's model.py API; run by run_tests.py)."""
import concurrent.futures
import os
import subprocess
import sys
import unittest

import grpc
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
import python_fixtures  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

# The fixture models the shared server (C.SERVER) serves.
setUpModule = C.serving("mlp", "pipe_three", "py_add_sub", "py_bls", "py_bls_repeat", "py_bls_repeat_async",
                        "py_preprocess", "py_repeat", "py_strings")


def children(pid):
    """Live (not zombie) processes whose parent is `pid`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def worker_fds(pid):
    """The server's descriptors of Python workers: shared-memory regions and process handles."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("/memfd:inferd-python") or target == "anon_inode:[pidfd]":
            out.append(target)
    return out


def bytes_input(name, shape, strings):
    return {"name": name, "datatype": "BYTES", "shape": list(shape), "data": strings}


class PythonBackend(unittest.TestCase):
    """Triton's example models on the shared server."""

    def test_add_sub_over_json_binary_and_grpc(self):
        a = np.random.default_rng(1).standard_normal(4).astype(np.float32)
        b = np.random.default_rng(2).standard_normal(4).astype(np.float32)
        st, js = C.SERVER.post_json("/v2/models/py_add_sub/infer", ic.v2_json_request({"INPUT0": a, "INPUT1": b}))
        self.assertEqual(st, 200, js)
        outs = {o["name"]: np.array(o["data"], np.float32) for o in js["outputs"]}
        np.testing.assert_allclose(outs["OUTPUT0"], a + b, rtol=1e-6)
        np.testing.assert_allclose(outs["OUTPUT1"], a - b, rtol=1e-6)
        body, hlen = ic.v2_binary_request({"INPUT0": a, "INPUT1": b})
        st, hdrs, data = C.SERVER.request("POST", "/v2/models/py_add_sub/infer", body,
                                          {"Inference-Header-Content-Length": str(hlen)})
        self.assertEqual(st, 200, data[:300])
        got = ic.decode_v2_response(hdrs, data)[1]
        np.testing.assert_array_equal(got["OUTPUT0"], a + b)
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
            resp = s.pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(
                gc.infer_request(s.pb, "py_add_sub", {"INPUT0": a, "INPUT1": b}, outputs=["OUTPUT1"]), timeout=60)
        got = gc.outputs_of(resp)
        self.assertEqual(list(got), ["OUTPUT1"])
        np.testing.assert_array_equal(got["OUTPUT1"], a - b)
        # The model logged through pb_utils.Logger at initialize, once per instance (count: 2).
        self.assertIsNotNone(C.SERVER.wait_for_log("initialized py_add_sub/1/py_add_sub_0_1"))
        st, md = C.SERVER.get_json("/v2/models/py_add_sub")
        self.assertEqual((md["platform"], md["inputs"][0]), ("python", {"name": "INPUT0", "datatype": "FP32", "shape": [4]}))
        st, cfg = C.SERVER.get_json("/v2/models/py_add_sub/config")
        self.assertEqual(cfg["backend"], "python")

    def test_concurrent_requests_reach_both_instances(self):
        a = np.arange(4, dtype=np.float32)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(C.SERVER.post_json, "/v2/models/py_add_sub/infer",
                                   ic.v2_json_request({"INPUT0": a * i, "INPUT1": a})) for i in range(64)]
            for i, f in enumerate(futures):
                st, js = f.result(timeout=120)
                self.assertEqual(st, 200, js)
                self.assertEqual(js["outputs"][0]["data"], (a * i + a).tolist())

    def test_bls_calls_another_model_sync_and_async(self):
        a = np.array([1, 2, 3, 4], np.float32)
        b = np.array([0.5, 0.5, 0.5, 0.5], np.float32)

        def call(model):
            body = ic.v2_json_request({"INPUT0": a, "INPUT1": b})
            body["inputs"].append(bytes_input("MODEL_NAME", [1], [model]))
            return C.SERVER.post_json("/v2/models/py_bls/infer", body)

        st, js = call("py_add_sub")
        self.assertEqual(st, 200, js)
        outs = {o["name"]: o["data"] for o in js["outputs"]}
        self.assertEqual(outs["SUM"], (a + b).tolist())
        self.assertEqual(outs["DIFF"], (a - b).tolist())
        self.assertEqual(outs["SAME"], [True])
        # A BLS call to a model that does not exist: the model sees the error and answers with it.
        st, js = call("no_such_model")
        self.assertEqual(st, 500, js)
        self.assertIn("BLS call failed", js["error"])
        self.assertIn("no_such_model", js["error"])
        # BLS into a TorchScript model with the wrong inputs: the callee's validation error comes back.
        st, js = call("mlp")
        self.assertEqual(st, 500, js)
        self.assertIn("BLS call failed", js["error"])

    def test_string_tensors(self):
        words = ["héllo", "wörld", "", "ab"]
        st, js = C.SERVER.post_json("/v2/models/py_strings/infer",
                                    {"inputs": [bytes_input("TEXT", [2, 2], words)]})
        self.assertEqual(st, 200, js)
        outs = {o["name"]: o for o in js["outputs"]}
        self.assertEqual(outs["UPPER"]["data"], [w.upper() for w in words])
        self.assertEqual(outs["UPPER"]["shape"], [2, 2])
        self.assertEqual(outs["LENGTH"]["data"], [len(w.encode()) for w in words])
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
            resp = s.pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(gc.infer_request(
                s.pb, "py_strings", {"TEXT": ([1, 3], [b"\x00bin", b"x" * 1000, "ü".encode()])}), timeout=60)
        got = gc.outputs_of(resp)
        self.assertEqual(got["UPPER"], [b"\x00BIN", b"X" * 1000, "Ü".encode()])

    def test_a_decoupled_model_streams_its_responses_over_grpc(self):
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
            stub = s.pb_grpc.GRPCInferenceServiceStub(ch)
            reqs = [gc.infer_request(s.pb, "py_repeat", {"IN": np.array([4, 5, 6], np.int32)}, id="a",
                                     params={"triton_enable_empty_final_response": True}),
                    gc.infer_request(s.pb, "py_repeat", {"IN": np.array([7, -1], np.int32)}, id="b",
                                     params={"triton_enable_empty_final_response": True})]
            got = {"a": [], "b": []}
            finals = {}
            for r in stub.ModelStreamInfer(iter(reqs), timeout=60):
                rid = r.infer_response.id
                final = r.infer_response.parameters["triton_final_response"].bool_param
                if r.error_message:
                    got[rid].append(("error", r.error_message))
                elif r.infer_response.outputs:
                    out = gc.outputs_of(r.infer_response)
                    got[rid].append((int(out["OUT"][0]), int(out["IDX"][0])))
                if final:
                    finals[rid] = finals.get(rid, 0) + 1
        self.assertEqual(got["a"], [(4, 0), (5, 1), (6, 2)])
        self.assertEqual(got["b"][0], (7, 0))
        self.assertEqual(got["b"][1][0], "error")
        self.assertIn("negative value at 1", got["b"][1][1])
        self.assertEqual(finals, {"a": 1, "b": 1})
        # Without triton_enable_empty_final_response a request the model answers with the final flag alone gets
        # no message on the stream (Triton's square example, input 0), and none ends the others' answers either.
        with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
            stub = s.pb_grpc.GRPCInferenceServiceStub(ch)
            reqs = [gc.infer_request(s.pb, "py_repeat", {"IN": np.array([], np.int32)}, id="none"),
                    gc.infer_request(s.pb, "py_repeat", {"IN": np.array([8, 9], np.int32)}, id="two")]
            seen = []
            for r in stub.ModelStreamInfer(iter(reqs), timeout=60):
                self.assertEqual(r.error_message, "")
                out = gc.outputs_of(r.infer_response) if r.infer_response.outputs else {}
                seen.append((r.infer_response.id, [int(v) for v in out.get("OUT", [])]))
        self.assertEqual(seen, [("two", [8]), ("two", [9])])
        # Over unary HTTP a decoupled model may answer once; more answers need the stream.
        st, js = C.SERVER.post_json("/v2/models/py_repeat/infer", ic.v2_json_request({"IN": np.array([9], np.int32)}))
        self.assertEqual(st, 200, js)
        self.assertEqual({o["name"]: o["data"] for o in js["outputs"]}, {"OUT": [9], "IDX": [0]})
        st, js = C.SERVER.post_json("/v2/models/py_repeat/infer", ic.v2_json_request({"IN": np.array([1, 2], np.int32)}))
        self.assertEqual(st, 400, js)
        self.assertIn("ModelStreamInfer", js["error"])

    def test_bls_iterates_over_a_decoupled_models_responses(self):
        st, js = C.SERVER.post_json("/v2/models/py_bls_repeat/infer",
                                    ic.v2_json_request({"IN": np.array([3, 4, 5, 6], np.int32)}))
        self.assertEqual(st, 200, js)
        self.assertEqual({o["name"]: o["data"] for o in js["outputs"]}, {"SUM": [18], "COUNT": [4]})
        st, js = C.SERVER.post_json("/v2/models/py_bls_repeat/infer",
                                    ic.v2_json_request({"IN": np.array([3, -4], np.int32)}))
        self.assertEqual(st, 500, js)
        self.assertIn("repeat failed: negative value at 1", js["error"])

    def test_async_bls_gathers_decoupled_calls_and_iterates_their_responses(self):
        st, js = C.SERVER.post_json("/v2/models/py_bls_repeat_async/infer",
                                    ic.v2_json_request({"IN": np.array([3, 4, 5], np.int32)}))
        self.assertEqual(st, 200, js)
        self.assertEqual({o["name"]: o["data"] for o in js["outputs"]}, {"SUMS": [12, 15], "COUNT": [6]})
        st, js = C.SERVER.post_json("/v2/models/py_bls_repeat_async/infer",
                                    ic.v2_json_request({"IN": np.array([2, -5], np.int32)}))
        self.assertEqual(st, 500, js)
        self.assertIn("repeat failed: negative value at 1", js["error"])

    def test_three_step_ensemble_matches_the_pipeline_run_in_python(self):
        rng = np.random.default_rng(11)
        rows = (rng.standard_normal((6, 8)) * 3).astype(np.float32)
        lines = [",".join("%r" % float(v) for v in row) for row in rows]
        # The same pipeline run directly: the preprocessing in numpy, the mlp in torch, the rules by hand.
        feats = (np.array([[float(v) for v in line.split(",")] for line in lines], np.float32)
                 - np.linspace(-0.5, 0.5, 8).astype(np.float32)) / np.linspace(0.5, 2.0, 8).astype(np.float32)
        logits = C.torch_ref("mlp", feats)
        probs = torch.softmax(torch.from_numpy(logits), dim=1).numpy()
        top = probs.argmax(axis=1)
        labels = ["cat", "dog", "bird"]
        want_label = [labels[i] if probs[r, i] >= 0.6 else "others" for r, i in enumerate(top)]
        want_conf = probs.max(axis=1).reshape(6, 1)

        def check(outs):
            np.testing.assert_allclose(np.asarray(outs["logits"], np.float32).reshape(6, 3), logits, rtol=1e-5,
                                       atol=1e-5)
            self.assertEqual([v.decode() if isinstance(v, bytes) else v for v in outs["label"]], want_label)
            np.testing.assert_allclose(np.asarray(outs["confidence"], np.float32).reshape(6, 1), want_conf,
                                       rtol=1e-5, atol=1e-6)

        st, js = C.SERVER.post_json("/v2/models/pipe_three/infer", {"inputs": [bytes_input("csv", [6, 1], lines)]})
        self.assertEqual(st, 200, js)
        check({o["name"]: o["data"] for o in js["outputs"]})
        # Binary: the BYTES input as a raw tensor, outputs binary.
        raw = gc.bytes_tensor([line.encode() for line in lines])
        header = ('{"inputs":[{"name":"csv","datatype":"BYTES","shape":[6,1],"parameters":{"binary_data_size":%d}}],'
                  '"parameters":{"binary_data_output":true}}' % len(raw)).encode()
        st, hdrs, data = C.SERVER.request("POST", "/v2/models/pipe_three/infer", header + raw,
                                          {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(st, 200, data[:300])
        check(ic.decode_v2_response(hdrs, data)[1])
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
            resp = s.pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(gc.infer_request(
                s.pb, "pipe_three", {"csv": ([6, 1], [line.encode() for line in lines])}), timeout=60)
        check(gc.outputs_of(resp))
        # A malformed line: the Python step's per-request error (INVALID_ARG -> 400) ends the ensemble.
        st, js = C.SERVER.post_json("/v2/models/pipe_three/infer", {"inputs": [bytes_input("csv", [1, 1], ["1,2"])]})
        self.assertEqual(st, 400, js)
        self.assertIn("8 comma-separated numbers", js["error"])


class PythonIsolation(unittest.TestCase):
    """Misbehaving user code and lifecycle, each on a server of its own."""

    @classmethod
    def setUpClass(cls):
        cls.repo = os.path.join(C.ARGS.workdir, "python_repository")
        python_fixtures.make_isolated(cls.repo)

    def server(self, *models):
        extra = ["--model-control-mode", "explicit"]
        for m in models:
            extra += ["--load-model", m]
        return ic.Server(C.ARGS.inferd, self.repo, *extra)

    def chaos(self, server, mode, rows=1):
        x = np.arange(2 * rows, dtype=np.float32).reshape(rows, 2)
        return server.post_json("/v2/models/py_chaos/infer", ic.v2_json_request({"X": x}, params={"mode": mode}))

    def test_errors_in_user_code_answer_clearly_and_the_server_keeps_serving(self):
        server = self.server("py_chaos", "py_add_sub")
        try:
            st, js = self.chaos(server, "ok")
            self.assertEqual(st, 200, js)
            pid = {o["name"]: o["data"] for o in js["outputs"]}["PID"][0]
            self.assertIn(pid, children(server.proc.pid))
            cases = [("raise", 500, ["ValueError: asked to raise", "model.py(", "execute"]),
                     ("exit", 500, ["sys.exit(3)"]),
                     ("wrong_dtype", 500, ["FP64", "FP32"]),
                     ("segfault", 500, ["killed by signal 11", "starts again"]),
                     ("hang", 503, ["did not return within 2 s", "killed"])]
            for mode, status, needles in cases:
                st, js = self.chaos(server, mode)
                self.assertEqual(st, status, (mode, js))
                for needle in needles:
                    self.assertIn(needle, js["error"], mode)
                # The next request is served (by a new worker after a crash or a hang).
                st, js = self.chaos(server, "ok")
                self.assertEqual(st, 200, (mode, js))
                new_pid = {o["name"]: o["data"] for o in js["outputs"]}["PID"][0]
                if mode in ("segfault", "hang"):
                    self.assertNotEqual(new_pid, pid, mode)
                    self.assertFalse(alive(pid), mode)
                    pid = new_pid
                else:
                    self.assertEqual(new_pid, pid, mode)
            self.assertEqual(len(children(server.proc.pid)), 2)  # py_chaos and py_add_sub: none left behind
            # Another model was never affected.
            a = np.ones(4, np.float32)
            st, js = server.post_json("/v2/models/py_add_sub/infer", ic.v2_json_request({"INPUT0": a, "INPUT1": a}))
            self.assertEqual(st, 200, js)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_a_per_request_error_leaves_the_rest_of_the_batch_alone(self):
        server = self.server("py_chaos")
        try:
            # preferred_batch_size 2 with a 200 ms window: the two requests form one batch.
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                bad = pool.submit(self.chaos, server, "error")
                good = pool.submit(self.chaos, server, "ok")
                st_bad, js_bad = bad.result(timeout=60)
                st_good, js_good = good.result(timeout=60)
            self.assertEqual(st_good, 200, js_good)
            self.assertEqual(st_bad, 500, js_bad)
            self.assertEqual(js_bad["error"], "this request is refused")
            st, stats = server.get_json("/v2/models/py_chaos/versions/1/stats")
            batches = {b["batch_size"]: b["compute_infer"]["count"] for b in stats["model_stats"][0]["batch_stats"]}
            self.assertEqual(batches, {2: 1}, stats)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_load_errors_name_the_cause(self):
        server = self.server()
        try:
            # A version that fails to load answers 503 like every backend's (the config itself was fine).
            st, js = server.post_json("/v2/repository/models/py_init_fails/load", {})
            self.assertEqual(st, 503, js)
            self.assertIn("initialize failed: RuntimeError: cannot find my weights", js["error"])
            st, js = server.post_json("/v2/repository/models/py_no_class/load", {})
            self.assertEqual(st, 503, js)
            self.assertIn("defines no class TritonPythonModel", js["error"])
            st, js = server.post_json("/v2/repository/models/identity_decoupled/load", {})
            self.assertEqual(st, 503, js)
            self.assertIn("backend 'identity' cannot answer in parts", js["error"])
            self.assertEqual(children(server.proc.pid), [])
            # auto_complete_config fills a config that names only the backend.
            st, js = server.post_json("/v2/repository/models/py_auto/load", {})
            self.assertEqual(st, 200, js)
            st, md = server.get_json("/v2/models/py_auto")
            self.assertEqual(md["inputs"], [{"name": "IN", "datatype": "INT32", "shape": [-1, 3]}])
            x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
            st, js = server.post_json("/v2/models/py_auto/infer", ic.v2_json_request({"IN": x}))
            self.assertEqual(st, 200, js)
            self.assertEqual(js["outputs"][0]["data"], (x * 10).flatten().tolist())
        finally:
            self.assertEqual(server.stop(), 0)

    def test_no_workers_are_left_and_memory_returns_after_load_unload_cycles(self):
        server = self.server()
        a = np.ones(4, np.float32)

        def cycle():
            st, js = server.post_json("/v2/repository/models/py_add_sub/load", {})
            self.assertEqual(st, 200, js)
            st, js = server.post_json("/v2/models/py_add_sub/infer", ic.v2_json_request({"INPUT0": a, "INPUT1": a}))
            self.assertEqual(st, 200, js)
            self.assertEqual(len(children(server.proc.pid)), 1)
            self.assertEqual(len(worker_fds(server.proc.pid)), 3)  # two regions, one pidfd
            st, js = server.post_json("/v2/repository/models/py_add_sub/unload", {})
            self.assertEqual(st, 200, js)
            self.assertEqual(children(server.proc.pid), [])
            self.assertEqual(worker_fds(server.proc.pid), [])

        try:
            for _ in range(10):
                cycle()
            rss, fds = rss_bytes(server.proc.pid), fd_count(server.proc.pid)
            for _ in range(90):
                cycle()
            grown = rss_bytes(server.proc.pid) - rss
            # Memory returns with the release build's allocator (jemalloc); the sanitizers' allocators keep
            # freed memory in quarantine (ASan grew 57 MB here), so there only leaks (LeakSanitizer) count.
            linked = subprocess.run(["ldd", C.ARGS.inferd], capture_output=True, text=True).stdout
            if "libjemalloc" in linked:
                self.assertLess(grown, 16 << 20, "RSS grew by %d bytes over 90 load/unload cycles" % grown)
            # Descriptors: none of the workers' left (checked each cycle); the rest (HTTP connections) steady.
            self.assertLessEqual(fd_count(server.proc.pid), fds + 2)
            st, js = server.post_json("/v2/repository/models/py_add_sub/load", {})
            self.assertEqual(st, 200, js)
            workers = children(server.proc.pid)
            self.assertEqual(len(workers), 1)
        finally:
            self.assertEqual(server.stop(), 0)
        # Shutdown ran finalize() and ended the worker.
        self.assertIsNotNone(server.wait_for_log("finalized py_add_sub/1/py_add_sub_0_0", timeout=1))
        # The server reaps its workers before it exits: none outlives it.
        self.assertFalse(alive(workers[0]))


if __name__ == "__main__":
    unittest.main()
