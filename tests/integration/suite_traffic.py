"""Integration suite: traffic policies (canary / A/B splits, stickiness; run by run_tests.py)."""
import json
import os
import re
import shutil
import sys
import textwrap
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401

# Answers its own version number (V) and 2 * X (Y), so a test sees which version served. Version 3
# misbehaves when the request parameter "v3" asks: "error", "slow" (0.2 s), "wrong" (Y + 1) or "gate" (waits
# until the file named by the parameter "gate" exists, at most 60 s).
WHICH = textwrap.dedent("""
    import json
    import os
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.version = int(args["model_version"])

        def execute(self, requests):
            out = []
            for r in requests:
                x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                mode = json.loads(r.parameters()).get("v3", "") if self.version == 3 else ""
                if mode == "error":
                    out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("v3 fails")))
                    continue
                if mode == "slow":
                    time.sleep(0.2)
                if mode == "gate":
                    deadline = time.monotonic() + 60
                    while not os.path.exists(json.loads(r.parameters())["gate"]) and time.monotonic() < deadline:
                        time.sleep(0.01)
                y = x * 2 + (1 if mode == "wrong" else 0)
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("V", np.array([self.version], np.int32)),
                                                       pb_utils.Tensor("Y", y.astype(np.float32))]))
            return out
    """).lstrip()


def make_repo(root):
    m = os.path.join(root, "which")
    for v in (1, 2, 3):
        os.makedirs(os.path.join(m, str(v)), exist_ok=True)
        with open(os.path.join(m, str(v), "model.py"), "w") as f:
            f.write(WHICH)
    with open(os.path.join(m, "config.pbtxt"), "w") as f:
        f.write('backend: "python"\nversion_policy { all {} }\n'
                'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
                'output [ { name: "V" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n')


class Traffic(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = os.path.join(C.ARGS.workdir, "traffic_repository")
        make_repo(cls.repo)
        cls.state = os.path.join(C.ARGS.workdir, "traffic_state")
        shutil.rmtree(cls.state, ignore_errors=True)  # a rerun starts without the last run's policy

    def server(self):
        return ic.Server(C.ARGS.inferd, self.repo, "--control-state-dir", self.state)

    def infer(self, server, params=None, version=None, conn=None):
        path = "/v2/models/which%s/infer" % ("/versions/%s" % version if version else "")
        st, js = server.post_json(path, ic.v2_json_request({"X": np.zeros(1, np.float32)}, params=params), conn=conn)
        self.assertEqual(st, 200, js)
        outs = {o["name"]: o["data"] for o in js["outputs"]}
        self.assertEqual(js["model_version"], str(outs["V"][0]))  # the body says who served
        return outs["V"][0]

    def check_transport_keys_and_other_protocols(self, server, conn):
        """The Inferd-Sticky-Key header (gRPC metadata inferd-sticky-key) keeps a user on one version;
        TF Serving predict and gRPC requests go through the split too."""
        body = json.dumps(ic.v2_json_request({"X": np.zeros(1, np.float32)})).encode()
        firsts = {}
        for u in range(40):
            seen = set()
            for _ in range(5):
                st, hdrs, data = server.request("POST", "/v2/models/which/infer", body,
                                                headers={"Inferd-Sticky-Key": "user-%d" % u}, conn=conn)
                self.assertEqual(st, 200, data)
                seen.add(hdrs.get("inferd-model-version"))
            self.assertEqual(len(seen), 1, (u, seen))
            firsts[u] = seen.pop()
        self.assertLessEqual(set(firsts.values()), {"1", "2"})
        # TF Serving's predict (no version in the URL) is split as well; its header names the version too.
        tf = set()
        for _ in range(300):
            st, hdrs, data = server.request("POST", "/v1/models/which:predict", b'{"inputs": {"X": [0.0]}}',
                                            conn=conn)
            self.assertEqual(st, 200, data)
            v = json.loads(data)["outputs"]["V"][0]
            self.assertEqual(hdrs.get("inferd-model-version"), str(int(v)), hdrs)
            tf.add(v)
        self.assertEqual(tf, {1, 2})
        # gRPC: unaddressed requests are split; the metadata key is sticky.
        import grpc
        import grpc_client as gc
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
            stub = s.pb_grpc.GRPCInferenceServiceStub(ch)
            req = gc.infer_request(s.pb, "which", {"X": np.zeros(1, np.float32)})
            served = {stub.ModelInfer(req, timeout=60).model_version for _ in range(300)}
            self.assertEqual(served, {"1", "2"})
            for u in range(20):
                md = (("inferd-sticky-key", "user-%d" % u),)
                versions = {stub.ModelInfer(req, metadata=md, timeout=60).model_version for _ in range(5)}
                self.assertEqual(len(versions), 1, (u, versions))
                # The same key over HTTP and gRPC reaches the same version.
                if u in firsts:
                    self.assertEqual(versions.pop(), firsts[u])

    def test_the_grpc_management_service_sets_policies_and_rollouts(self):
        import grpc
        s = C.stubs()
        state = os.path.join(C.ARGS.workdir, "traffic_grpc_state")
        shutil.rmtree(state, ignore_errors=True)
        server = ic.Server(C.ARGS.inferd, self.repo, "--control-state-dir", state)
        try:
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                mg = s.management_grpc.ManagementServiceStub(ch)
                pb = s.management
                got = json.loads(mg.GetTraffic(pb.ModelRequest(model_name="which"), timeout=60).json)
                self.assertEqual(got["source"], "none", got)
                # Bad policies: INVALID_ARGUMENT, nothing changes.
                for body, why in (('{"split": {"1": 90, "2": 5}}', "sum to 95"), ("nope", "not a JSON object"),
                                  ('{"split": {"1": 90, "9": 10}}', "no version 9")):
                    with self.assertRaises(grpc.RpcError) as e:
                        mg.SetTraffic(pb.JsonRequest(model_name="which", json=body), timeout=60)
                    self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, body)
                    self.assertIn(why, e.exception.details(), body)
                with self.assertRaises(grpc.RpcError) as e:
                    mg.GetTraffic(pb.ModelRequest(model_name="nope"), timeout=60)
                self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
                got = json.loads(mg.SetTraffic(pb.JsonRequest(model_name="which", json='{"split": {"1": 50, "2": 50}}'),
                                               timeout=60).json)
                self.assertEqual((got["source"], got["policy"]["split"]), ("runtime", {"1": 50, "2": 50}), got)
                # The same answer as HTTP's, and requests follow it.
                self.assertEqual(server.get_json("/v2/repository/models/which/traffic")[1], got)
                self.assertEqual({self.infer(server) for _ in range(60)}, {1, 2})
                got = json.loads(mg.ClearTraffic(pb.ModelRequest(model_name="which"), timeout=60).json)
                self.assertEqual(got["source"], "none", got)
                # Rollouts: a bad request is INVALID_ARGUMENT; one started over gRPC is seen over HTTP, and aborted.
                with self.assertRaises(grpc.RpcError) as e:
                    mg.StartRollout(pb.JsonRequest(model_name="which", json='{"version": "2", "interval_seconds": -1}'),
                                    timeout=60)
                self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("interval_seconds", e.exception.details())
                got = json.loads(mg.StartRollout(pb.JsonRequest(
                    model_name="which", json='{"version": "2", "steps": [10, 100], "interval_seconds": 600}'),
                    timeout=60).json)
                self.assertEqual((got["phase"], got["canary_percent"]), ("running", 10), got)
                self.assertEqual(server.get_json("/v2/repository/models/which/rollout")[1]["phase"], "running")
                self.assertEqual(json.loads(mg.GetRollout(pb.ModelRequest(model_name="which"), timeout=60).json)["phase"],
                                 "running")
                got = json.loads(mg.AbortRollout(pb.ModelRequest(model_name="which"), timeout=60).json)
                self.assertEqual((got["phase"], got["canary_percent"]), ("aborted", 0), got)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_split_stickiness_bypass_persistence_and_bad_policies(self):
        server = self.server()
        try:
            for label, v in (("stable", "1"), ("canary", "2")):
                st, _, data = server.request("PUT", "/v2/repository/models/which/labels/" + label,
                                             ('{"version": "%s"}' % v).encode())
                self.assertEqual(st, 200, data)
            st, js = server.get_json("/v2/repository/models/which/traffic")
            self.assertEqual((st, js["source"]), (200, "none"), js)
            # Malformed or impossible policies: 400, nothing changes.
            for body, why in (('{"split": {"stable": 90, "canary": 5}}', "sum to 95"),
                              ('{"split": {"stable": 90, "7": 10}}', "no version 7"),
                              ('{"split": {"stable": 90, "beta": 10}}', "no label 'beta'"),
                              ('{"split": {"stable": -90, "canary": 190}}', "0..100"),
                              ('{"shadow": {"target": "2", "percent": 101}}', "0..100"),
                              ("not json", "not a JSON object")):
                st, _, data = server.request("PUT", "/v2/repository/models/which/traffic", body.encode())
                self.assertEqual(st, 400, (body, data))
                self.assertIn(why, data.decode(), body)
            self.assertEqual(server.get_json("/v2/repository/models/which/traffic")[1]["source"], "none")
            st, _, data = server.request("PUT", "/v2/repository/models/which/traffic",
                                         b'{"split": {"stable": 90, "canary": 10}, "sticky_key": "user"}')
            self.assertEqual(st, 200, data)
            import http.client
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            n = 10000
            got = [self.infer(server, conn=conn) for _ in range(n)]
            share = got.count(2) / n
            self.assertLess(abs(share - 0.10), 0.02, share)
            self.assertEqual(set(got), {1, 2})
            # One user always sees one version; explicit versions bypass the split.
            for u in range(20):
                first = self.infer(server, params={"user": "u%d" % u}, conn=conn)
                for _ in range(5):
                    self.assertEqual(self.infer(server, params={"user": "u%d" % u}, conn=conn), first)
            for _ in range(50):
                self.assertEqual(self.infer(server, version="3", conn=conn), 3)
            self.check_transport_keys_and_other_protocols(server, conn)
            # The response header names the version that answered, as the body does.
            st, hdrs, data = server.request("POST", "/v2/models/which/infer", json.dumps(ic.v2_json_request(
                {"X": np.zeros(1, np.float32)}, params={"user": "u1"})).encode())
            self.assertEqual(hdrs.get("inferd-model-version"), json.loads(data)["model_version"])
            conn.close()
        finally:
            self.assertEqual(server.stop(), 0)
        # The policy survives a restart (control state), and DELETE returns to the config's (none).
        server = self.server()
        try:
            st, js = server.get_json("/v2/repository/models/which/traffic")
            self.assertEqual((js["source"], js["policy"]["split"]), ("runtime", {"stable": 90, "canary": 10}), js)
            st, _, data = server.request("DELETE", "/v2/repository/models/which/traffic")
            self.assertEqual(st, 200, data)
            self.assertEqual(server.get_json("/v2/repository/models/which/traffic")[1]["source"], "none")
            self.assertEqual({self.infer(server) for _ in range(30)}, {1})  # the default: `stable`
        finally:
            self.assertEqual(server.stop(), 0)


class Shadow(unittest.TestCase):
    def shadow_counts(self, server):
        text = server.metrics()
        counts = {}
        for outcome in ("agreed", "disagreed", "failed", "skipped"):
            m = re.search(r'^inferd_shadow_requests_total\{model="which",version="3",outcome="%s"\} (\d+)' % outcome,
                          text, re.M)
            counts[outcome] = int(m.group(1)) if m else 0
        return counts

    def wait_counts(self, server, want):
        """Shadow answers arrive after the clients': waits (bounded) until the counts reach `want`."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = self.shadow_counts(server)
            if got == want:
                return got
            time.sleep(0.05)  # polling the metrics endpoint: no event to wait on from outside
        return self.shadow_counts(server)

    def test_a_shadow_never_changes_the_clients_answers_and_its_comparison_is_counted(self):
        repo = os.path.join(C.ARGS.workdir, "shadow_repository")
        make_repo(repo)
        state = os.path.join(C.ARGS.workdir, "shadow_state")
        shutil.rmtree(state, ignore_errors=True)
        server = ic.Server(C.ARGS.inferd, repo, "--control-state-dir", state)
        try:
            st, _, data = server.request("PUT", "/v2/repository/models/which/labels/stable", b'{"version": "1"}')
            self.assertEqual(st, 200, data)
            st, _, data = server.request("PUT", "/v2/repository/models/which/traffic",
                                         b'{"split": {"stable": 100}, "shadow": {"target": "3", "percent": 100}}')
            self.assertEqual(st, 200, data)
            x = np.array([1.5], np.float32)
            want = {"agreed": 0, "disagreed": 0, "failed": 0, "skipped": 0}
            for mode, outcome in (("", "agreed"), ("wrong", "disagreed"), ("error", "failed"), ("slow", "agreed")):
                n = 5 if mode == "slow" else 40
                for _ in range(n):
                    st, js = server.post_json("/v2/models/which/infer", ic.v2_json_request(
                        {"X": x}, outputs=[{"name": "Y"}], params={"v3": mode}))
                    self.assertEqual(st, 200, (mode, js))
                    self.assertEqual(js["model_version"], "1")
                    self.assertEqual(js["outputs"][0]["data"], [3.0])
                want[outcome] += n
                self.assertEqual(self.wait_counts(server, want), want, mode)
            self.assertIn('inferd_shadow_max_abs_diff{model="which",version="3"} 1', server.metrics())
        finally:
            self.assertEqual(server.stop(), 0)

    def test_a_stuck_shadow_holds_at_most_its_in_flight_bound(self):
        repo = os.path.join(C.ARGS.workdir, "shadow_repository")
        make_repo(repo)
        state = os.path.join(C.ARGS.workdir, "shadow_bound_state")
        shutil.rmtree(state, ignore_errors=True)
        gate = os.path.join(C.ARGS.workdir, "shadow_gate")
        if os.path.exists(gate):
            os.remove(gate)
        server = ic.Server(C.ARGS.inferd, repo, "--control-state-dir", state, "--shadow-max-in-flight", "2")
        try:
            st, _, data = server.request("PUT", "/v2/repository/models/which/traffic",
                                         b'{"split": {"1": 100}, "shadow": {"target": "3", "percent": 100}}')
            self.assertEqual(st, 200, data)
            # The shadow blocks until the gate opens: two mirrored requests run or queue, the rest are
            # skipped, and the clients' answers never wait for it.
            for _ in range(10):
                st, js = server.post_json("/v2/models/which/infer", ic.v2_json_request(
                    {"X": np.array([1.5], np.float32)}, outputs=[{"name": "Y"}], params={"v3": "gate", "gate": gate}))
                self.assertEqual(st, 200, js)
                self.assertEqual(js["outputs"][0]["data"], [3.0])
            self.assertEqual(self.shadow_counts(server)["skipped"], 8)
            open(gate, "w").close()
            want = {"agreed": 2, "disagreed": 0, "failed": 0, "skipped": 8}
            self.assertEqual(self.wait_counts(server, want), want)
        finally:
            if not os.path.exists(gate):
                open(gate, "w").close()  # lets a stuck shadow finish so the server stops
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main()
