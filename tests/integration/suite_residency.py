"""Integration suite: residency (run by run_tests.py)."""
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
from common import setUpModule, tearDownModule  # noqa: E402,F401


class Residency(unittest.TestCase):
    """On-demand residency: a few hundred generated models under a small memory budget."""

    N = 240

    @classmethod
    def setUpClass(cls):
        cls.repo = os.path.join(C.ARGS.workdir, "tenants_repo")
        ic.remove_repository(cls.repo)
        subprocess.check_call([sys.executable, os.path.join(C.ROOT, "bench", "make_tenant_models.py"), cls.repo,
                               str(cls.N)])
        # One pinned model: loaded at start, never evicted.
        with open(os.path.join(cls.repo, "tenant_00000", "config.pbtxt"), "a") as f:
            f.write('parameters { key: "pinned" value: { string_value: "true" } }\n')
        sys.path.insert(0, os.path.join(C.ROOT, "bench"))
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
        if not np.allclose(y, self.expected[name], atol=C.TOL):
            return "%s: wrong answer" % name
        return None

    def test_many_models_under_a_small_budget(self):
        budget = 4 << 20  # holds roughly 25 of these models (~140 KiB each, measured)
        server = ic.Server(C.ARGS.inferd, self.repo, "--model-residency", "on-demand", "--memory-budget", "4MiB",
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
            self.assertGreater(C.metric(text, "inferd_model_evictions_total"), 0)
            self.assertGreaterEqual(C.metric(text, "inferd_model_cold_starts_total"), self.N)
            self.assertLessEqual(C.metric(text, "inferd_memory_budget_used_bytes"), budget)
            self.assertEqual(C.metric(text, "inferd_memory_budget_bytes"), budget)
            self.assertEqual(C.metric(text, "inferd_models_registered"), self.N)
            self.assertLess(C.metric(text, "inferd_models_loaded"), self.N)
            # The stored states add up: every model is in exactly one, READY ones are the loaded ones.
            by_state = {st: C.metric(text, 'inferd_models_by_state{state="%s"}' % st)
                        for st in ("LOADING", "READY", "UNLOADING", "UNAVAILABLE", "FAILED", "EVICTED")}
            self.assertEqual(sum(by_state.values()), self.N, by_state)
            self.assertEqual(by_state["READY"], C.metric(text, "inferd_models_loaded"), by_state)
            self.assertGreater(by_state["EVICTED"], 0, by_state)
            self.assertGreater(C.metric(text, "inferd_model_load_duration_seconds_count"), self.N)
            self.assertGreater(C.metric(text, "inferd_model_eviction_age_seconds_count"), 0)

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

    def test_metadata_config_and_predict_of_a_model_not_resident_wait_for_its_load(self):
        # Like /infer, every route whose answer needs the model waits for an on-demand model's load instead of
        # answering 503 (one model not resident per route: each call is that model's first).
        server = ic.Server(C.ARGS.inferd, self.repo, "--model-residency", "on-demand", "--memory-budget", "64MiB",
                           "--model-min-residency-secs", "0")
        try:
            names = [self.mtm.model_name("tenant_", i) for i in (1, 2, 3, 4, 5)]
            for name in names:
                st, index = server.post_json("/v2/repository/index", {})
                state = {e["name"]: e["state"] for e in index}[name]
                self.assertEqual(state, "UNAVAILABLE", (name, state))  # not resident before its first call
            st, md = server.get_json("/v2/models/" + names[0])
            self.assertEqual(st, 200, md)
            self.assertEqual(md["name"], names[0])
            self.assertEqual([t["name"] for t in md["inputs"]], ["x"])
            st, cfg = server.get_json("/v2/models/%s/config" % names[1])
            self.assertEqual(st, 200, cfg)
            self.assertEqual(cfg["name"], names[1])
            st, v1 = server.get_json("/v1/models/%s/metadata" % names[2])
            self.assertEqual(st, 200, v1)
            st, pred = server.post_json("/v1/models/%s:predict" % names[3], {"instances": self.x.tolist()})
            self.assertEqual(st, 200, pred)
            np.testing.assert_allclose(np.array(pred["predictions"], np.float32), self.expected[names[3]],
                                       atol=C.TOL)
            import grpc
            s = C.stubs()
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                stub = s.pb_grpc.GRPCInferenceServiceStub(ch)
                self.assertEqual(stub.ModelMetadata(s.pb.ModelMetadataRequest(name=names[4]), timeout=60).name,
                                 names[4])
                self.assertEqual(stub.ModelConfig(s.pb.ModelConfigRequest(name=names[4]), timeout=60).config.name,
                                 names[4])
            st, _, _ = server.request("GET", "/v2/models/nope")
            self.assertEqual(st, 404)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_budget_needs_on_demand_and_valid_units(self):
        for extra, why in ((["--memory-budget", "1GiB"], "needs --model-residency on-demand"),
                           (["--model-residency", "on-demand", "--memory-budget", "12XB"], "invalid byte size")):
            out = subprocess.run([C.ARGS.inferd, "serve", "--model-repository", self.repo, "--http-port", "0",
                                  "--metrics-port", "0", *extra], capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn(why, out.stderr)

    def test_size_override_and_unknown_model(self):
        repo = os.path.join(C.ARGS.workdir, "tenants_override")
        ic.remove_repository(repo)
        subprocess.check_call([sys.executable, os.path.join(C.ROOT, "bench", "make_tenant_models.py"), repo, "3"])
        with open(os.path.join(repo, "tenant_00001", "config.pbtxt"), "a") as f:
            f.write('parameters { key: "memory_bytes" value: { string_value: "3MiB" } }\n')
        with open(os.path.join(repo, "tenant_00002", "config.pbtxt"), "a") as f:
            f.write('parameters { key: "memory_bytes" value: { string_value: "lots" } }\n')
        server = ic.Server(C.ARGS.inferd, repo, "--model-residency", "on-demand", "--memory-budget", "8MiB",
                           "--model-min-residency-secs", "0")
        try:
            self.assertIsNone(self.check(server, "tenant_00000"))
            self.assertIsNone(self.check(server, "tenant_00001"))  # 3 MiB declared: fits next to tenant_00000
            st, listing = server.get_json("/v2/repository/models")
            by_name = {m["name"]: m for m in listing["models"]}
            self.assertEqual(by_name["tenant_00001"]["resident_bytes"], 3 << 20)
            self.assertEqual(by_name["tenant_00001"]["versions"][0]["size_source"], "config")
            # Measured with jemalloc's counters; builds without jemalloc (sanitizers) fall back to file sizes.
            linked = subprocess.run(["ldd", C.ARGS.inferd], capture_output=True, text=True).stdout
            self.assertEqual(by_name["tenant_00000"]["versions"][0]["size_source"],
                             "measured" if "libjemalloc" in linked else "files")
            st, hdrs, data = server.request("POST", "/v2/models/tenant_00002/infer",
                                            json.dumps(ic.v2_json_request({"x": self.x})).encode())
            self.assertEqual(st, 503, data)
            self.assertEqual(hdrs.get("retry-after"), "1", hdrs)  # every 503 says when to retry
            self.assertIn("memory_bytes", json.loads(data)["error"])
            # A model whose load failed is not ready (until its files change).
            self.assertEqual(server.request("GET", "/v2/models/tenant_00002/ready")[0], 400)
            st, js = server.post_json("/v2/models/nope/infer", ic.v2_json_request({"x": self.x}))
            self.assertEqual(st, 404, js)
        finally:
            self.assertEqual(server.stop(), 0)
