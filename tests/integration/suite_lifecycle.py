"""Integration suite: lifecycle (run by run_tests.py)."""
import json
import os
import subprocess
import sys
import threading
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
import make_fixtures  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401


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
        self.repo = os.path.join(C.ARGS.workdir, "lifecycle_repo")
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
        np.testing.assert_allclose(y, self.x * k, atol=C.TOL)
        return int(round(k)), js.get("model_version")

    def test_publish_fail_rollback_and_labels_survive_restart(self):
        server = ic.Server(C.ARGS.inferd, self.repo, "--model-control-mode", "explicit", "--load-model", "lc")
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
            np.testing.assert_allclose(np.array(js["predictions"]), self.x, atol=C.TOL)
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
            out = subprocess.run([C.ARGS.inferd, "rollback", "lc", "--url", url], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("rolled back from version 2 to version 1", out.stdout)
            self.assertEqual(self.answer(server), (1, "1"))
            out = subprocess.run([C.ARGS.inferd, "rollback", "lc", "--url", url], capture_output=True, text=True)
            self.assertEqual(out.returncode, 1)  # nothing older: the server's reason is printed
            self.assertIn("no earlier default version", out.stderr)
            out = subprocess.run([C.ARGS.inferd, "rollback", "nope", "--url", url], capture_output=True, text=True)
            self.assertEqual(out.returncode, 1)
            self.assertIn("HTTP 404", out.stderr)
            out = subprocess.run([C.ARGS.inferd, "models", "--url", url], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            row = [line.split() for line in out.stdout.splitlines() if line.startswith("lc ")][0]
            self.assertEqual(row[:5], ["lc", "READY", "1", "1,2", "failed:3"])
            self.assertIn("canary=2", row)
            self.assertIn("stable=1", row)
            out = subprocess.run([C.ARGS.inferd, "models", "lc", "nope", "--url", url], capture_output=True, text=True)
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
        server = ic.Server(C.ARGS.inferd, self.repo, "--model-control-mode", "explicit", "--load-model", "lc")
        try:
            self.assertEqual(self.answer(server), (1, "1"))
            self.assertEqual(self.answer(server, "/v2/models/lc/labels/canary/infer"), (2, "2"))
        finally:
            self.assertEqual(server.stop(), 0)

    def test_swaps_under_concurrent_requests_lose_nothing(self):
        server = ic.Server(C.ARGS.inferd, self.repo, "--model-control-mode", "explicit", "--load-model", "lc")
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
                if not np.allclose(y, self.x * k, atol=C.TOL) or str(int(round(k))) != js["model_version"]:
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
