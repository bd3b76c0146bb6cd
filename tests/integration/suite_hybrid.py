"""Integration suite: hybrid (precomputed + online) serving from prediction tables (run by run_tests.py).

Models are copies of the `mlp` fixture with `precomputed.*` parameters; online answers are compared with the
same TorchScript model run by python3-torch, stored answers with the values planted in the table."""
import json
import os
import shutil
import sqlite3
import sys
import time
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
import pg_server  # noqa: E402
import redis_server  # noqa: E402
from suite_batch import mlp_inputs, write_csv  # noqa: E402



def hybrid_model(repo, name, **params):
    """A copy of the mlp fixture named `name` with precomputed.<k> = v parameters."""
    C.copy_model(repo, name, {"precomputed." + k: v for k, v in params.items()})


class Hybrid(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.abspath(os.path.join(C.ARGS.workdir, "hybrid", self._testMethodName))
        shutil.rmtree(self.dir, ignore_errors=True)
        self.data = os.path.join(self.dir, "data")
        self.repo = os.path.join(self.dir, "repo")
        os.makedirs(self.data)
        os.makedirs(self.repo)
        self.db = os.path.join(self.data, "preds.db")
        self.server = None
        self.pg = None
        self.redis = None

    def tearDown(self):
        try:
            if self.server:
                self.assertEqual(self.server.stop(), 0, "".join(self.server.log[-30:]))
        finally:  # a failed stop must not leave the databases running
            if self.pg:
                self.pg.close()
            if self.redis:
                self.redis.close()

    def start(self, connections, *models):
        config = os.path.join(self.dir, "jobs.json")
        with open(config, "w") as f:
            json.dump({"allowed_dirs": [self.data], "connections": connections}, f)
        args = []
        for m in models:
            args += ["--load-model", m]
        self.server = ic.Server(C.ARGS.inferd, self.repo, "--control-state-dir", os.path.join(self.dir, "state"),
                                "--jobs-config", config, "--model-control-mode", "explicit", *args)
        return self.server

    def infer(self, model, x, key=None, expect=200, **params):
        if key is not None:
            params["id"] = key
        status, body = self.server.post_json("/v2/models/%s/infer" % model,
                                             ic.v2_json_request({"x": x.reshape(1, 8)}, params=params or None))
        self.assertEqual(status, expect, body)
        return body

    def y(self, body):
        out = next(o for o in body["outputs"] if o["name"] == "y")
        self.assertEqual(out["shape"], [1, 3])
        return np.array(out["data"], np.float32)

    def test_hits_come_from_the_table_misses_run_online_and_stale_rows_do_not_answer(self):
        hybrid_model(self.repo, "scorer", connection="preds", table="scores", key_parameter="id")
        hybrid_model(self.repo, "scorer_young", connection="preds", table="scores", key_parameter="id",
                     max_age_seconds="3600", version="any")
        hybrid_model(self.repo, "scorer_wb", connection="preds", table="written", key_parameter="id",
                     write_back="true")
        keys, x = mlp_inputs(300, 21)
        ref = C.torch_ref("mlp", x)
        write_csv(os.path.join(self.data, "in.csv"), keys, x)
        s = self.start({"preds": {"type": "sqlite", "path": self.db}}, "scorer", "scorer_young", "scorer_wb")
        # A batch job fills the table the model reads.
        status, doc = s.post_json("/v2/jobs", {"model": "scorer", "source": {"type": "csv", "path": "in.csv"},
                                               "sink": {"type": "sqlite", "connection": "preds", "table": "scores"},
                                               "key": "id", "inputs": {"x": ["f%d" % i for i in range(8)]}})
        self.assertEqual(status, 201, doc)
        C.wait_until(self, "the job to succeed", lambda: s.get_json("/v2/jobs/" + doc["id"])[1]["state"] == "succeeded",
                     timeout=120)
        con = sqlite3.connect(self.db)
        con.execute("UPDATE scores SET y = '[111.5,-222.25,333]' WHERE id = 'k7'")  # a distinctive answer
        con.execute("UPDATE scores SET model_version = '0' WHERE id = 'k8'")  # written by another version
        con.execute("UPDATE scores SET predicted_at = predicted_at - 7200 WHERE id = 'k9'")  # two hours old
        con.commit()
        con.close()

        body = self.infer("scorer", x[7], key="k7")
        self.assertEqual(body["parameters"], {"source": "precomputed"})
        np.testing.assert_array_equal(self.y(body), np.array([111.5, -222.25, 333], np.float32))
        body = self.infer("scorer", x[5], key="k5")  # the job's own answer, equal to PyTorch's
        self.assertEqual(body["parameters"]["source"], "precomputed")
        C.assert_matches_torch(self.y(body), ref[5])
        body = self.infer("scorer", x[8], key="k8")  # another version's row: online
        self.assertEqual(body["parameters"]["source"], "online")
        C.assert_matches_torch(self.y(body), ref[8])
        body = self.infer("scorer", x[3], key="nobody")  # no row: online
        self.assertEqual(body["parameters"]["source"], "online")
        C.assert_matches_torch(self.y(body), ref[3])
        body = self.infer("scorer", x[3])  # no key: online as usual, no source
        self.assertNotIn("parameters", body)
        C.assert_matches_torch(self.y(body), ref[3])
        # A key and no inputs only asks the table: a hit answers, anything else is a clear 404 / 400.
        status, body = s.post_json("/v2/models/scorer/infer", {"inputs": [], "parameters": {"id": "k7"}})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["parameters"], {"source": "precomputed"})
        np.testing.assert_array_equal(self.y(body), np.array([111.5, -222.25, 333], np.float32))
        for key, why in (("k8", "has no fresh precomputed answer for key 'k8'"),
                         ("nobody", "has no precomputed answer for key 'nobody', and the request has no inputs")):
            status, body = s.post_json("/v2/models/scorer/infer", {"inputs": [], "parameters": {"id": key}})
            self.assertEqual(status, 404, body)
            self.assertIn(why, body["error"])
        status, body = s.post_json("/v2/models/scorer/infer", {"inputs": [], "outputs": [{"name": "z"}],
                                                               "parameters": {"id": "k7"}})
        self.assertEqual(status, 400, body)
        self.assertIn("outputs the precomputed store does not hold (it holds: y)", body["error"])
        status, body = s.post_json("/v2/models/scorer/infer", {"inputs": []})  # no key either
        self.assertEqual(status, 400, body)
        # max_age_seconds: the two-hour-old row is stale, a fresh one answers (rows of model "scorer" are
        # another model's for "scorer_young": those never answer).
        con = sqlite3.connect(self.db)
        con.execute("UPDATE scores SET model_name = 'scorer_young' WHERE id IN ('k9', 'k10')")
        con.commit()
        con.close()
        self.assertEqual(self.infer("scorer_young", x[9], key="k9")["parameters"]["source"], "online")
        self.assertEqual(self.infer("scorer_young", x[10], key="k10")["parameters"]["source"], "precomputed")
        self.assertEqual(self.infer("scorer_young", x[11], key="k11")["parameters"]["source"], "online")

        # Write-back: the first answer runs online and is stored; the next comes from the table.
        body = self.infer("scorer_wb", x[12], key="k12")
        self.assertEqual(body["parameters"]["source"], "online")
        C.assert_matches_torch(self.y(body), ref[12])
        online = self.y(body)

        def written():
            c = sqlite3.connect(self.db)
            try:
                return c.execute("SELECT y FROM written WHERE id = 'k12'").fetchone()
            except sqlite3.OperationalError:  # the table is created by the first write-back
                return None
            finally:
                c.close()
        C.wait_until(self, "the write-back", lambda: written() is not None)
        np.testing.assert_array_equal(np.array(json.loads(written()[0]), np.float32), online)  # stored exactly
        body = self.infer("scorer_wb", x[12], key="k12")
        self.assertEqual(body["parameters"]["source"], "precomputed")
        np.testing.assert_array_equal(self.y(body), online)

        m = s.metrics()
        for result, n in (("hit", 3), ("miss", 2), ("stale", 2), ("bypass", 1)):
            self.assertIn('inferd_precomputed_lookups_total{model="scorer",result="%s"} %d' % (result, n), m)
        # k9 (too old) and k11 (a row of model "scorer") were stale for scorer_young; k10 answered.
        self.assertIn('inferd_precomputed_lookups_total{model="scorer_young",result="stale"} 2', m)
        self.assertIn('inferd_precomputed_lookups_total{model="scorer_young",result="hit"} 1', m)
        self.assertIn('inferd_precomputed_write_backs_total{model="scorer_wb",result="written"} 1', m)

        # Over gRPC the response says the same (ModelInferResponse.parameters).
        pb = C.stubs().pb
        with grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port) as ch:
            stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
            resp = stub.ModelInfer(gc.infer_request(pb, "scorer", {"x": x[7].reshape(1, 8)}, params={"id": "k7"}),
                                   timeout=60)
        self.assertEqual(resp.parameters["source"].string_param, "precomputed")
        np.testing.assert_array_equal(np.frombuffer(resp.raw_output_contents[0], np.float32),
                                      np.array([111.5, -222.25, 333], np.float32))

    def test_bad_keys_and_configs_are_clear_errors(self):
        hybrid_model(self.repo, "scorer", connection="preds", table="scores", key_parameter="id")
        hybrid_model(self.repo, "unknown_conn", connection="nowhere", table="scores")
        hybrid_model(self.repo, "bad_setting", connection="preds", table="scores", colour="red")
        _, x = mlp_inputs(2, 3)
        s = self.start({"preds": {"type": "sqlite", "path": self.db}}, "scorer")
        status, body = s.post_json("/v2/models/scorer/infer",
                                   ic.v2_json_request({"x": x}, params={"id": "k1"}))
        self.assertEqual(status, 400, body)
        self.assertIn("names one row; this request has 2 rows", body["error"])
        body = self.infer("scorer", x[0], key=True, expect=400)
        self.assertIn("must be a string or an integer", body["error"])
        body = self.infer("scorer", x[0], key="k1")  # the table does not exist yet: a miss
        self.assertEqual(body["parameters"]["source"], "online")
        # A malformed setting is a config error (400); a connection the server does not have fails the
        # version's load (503, as a version that cannot load does), both with the reason.
        for model, code, why in (("unknown_conn", 503, "'nowhere' is not a connection of the server's jobs config"),
                                 ("bad_setting", 400, "parameters.precomputed.colour")):
            status, body = s.post_json("/v2/repository/models/%s/load" % model, {})
            self.assertEqual(status, code, body)
            self.assertIn(why, body["error"])

    def test_postgres_stopped_mid_traffic_falls_back_or_fails_as_configured_and_recovers(self):
        self.pg = pg_server.PgServer()
        hybrid_model(self.repo, "pg_scorer", connection="wh", table="scores", key_parameter="id")
        hybrid_model(self.repo, "pg_strict", connection="wh", table="scores", key_parameter="id",
                     on_store_error="fail")
        keys, x = mlp_inputs(3, 8)
        ref = C.torch_ref("mlp", x)
        self.pg.psql("CREATE TABLE scores (id TEXT PRIMARY KEY, model_name TEXT NOT NULL, model_version TEXT NOT "
                     "NULL, predicted_at DOUBLE PRECISION NOT NULL, y JSONB)")
        for model in ("pg_scorer", "pg_strict"):
            self.pg.psql("INSERT INTO scores VALUES ('%s-k0', '%s', '1', extract(epoch from now()), "
                         "'[7.5, 8.5, 9.5]')" % (model, model))
        s = self.start({"wh": {"type": "postgres", "conninfo": self.pg.conninfo}}, "pg_scorer", "pg_strict")
        for model in ("pg_scorer", "pg_strict"):
            body = self.infer(model, x[0], key=model + "-k0")
            self.assertEqual(body["parameters"]["source"], "precomputed")
            np.testing.assert_array_equal(self.y(body), np.array([7.5, 8.5, 9.5], np.float32))

        self.pg.stop()  # the database goes away in the middle of traffic
        body = self.infer("pg_scorer", x[0], key="pg_scorer-k0")  # online fallback
        self.assertEqual(body["parameters"]["source"], "online")
        C.assert_matches_torch(self.y(body), ref[0])
        body = self.infer("pg_strict", x[0], key="pg_strict-k0", expect=503)
        self.assertIn("the precomputed store ('wh', table 'scores') cannot answer", body["error"])
        self.assertIn("PostgreSQL connection 'wh'", body["error"])
        self.assertNotIn("host=", body["error"])  # the conninfo is never shown
        self.assertIn('inferd_precomputed_lookups_total{model="pg_scorer",result="error"} 1', s.metrics())

        self.pg.start()  # back: the stores reconnect (at most once a second) and answer from the table again
        C.wait_until(self, "the store to answer again", lambda: self._strict_ok(x), timeout=60)
        # Each lookup thread has its own connection and reconnects on its own: until the one a request lands on
        # is back, pg_scorer answers online (the fallback), then from the table.
        C.wait_until(self, "pg_scorer to answer from the table again",
                     lambda: self.infer("pg_scorer", x[0], key="pg_scorer-k0")["parameters"]["source"] == "precomputed",
                     timeout=60)

    def test_redis_as_the_prediction_store(self):
        self.redis = redis_server.RedisServer()
        hybrid_model(self.repo, "scorer", connection="online", table="scores", key_parameter="id")
        keys, x = mlp_inputs(50, 12)
        ref = C.torch_ref("mlp", x)
        write_csv(os.path.join(self.data, "in.csv"), keys, x)
        s = self.start({"online": {"type": "redis", "port": self.redis.port}}, "scorer")
        status, doc = s.post_json("/v2/jobs", {"model": "scorer", "source": {"type": "csv", "path": "in.csv"},
                                               "sink": {"type": "redis", "connection": "online", "table": "scores"},
                                               "key": "id", "inputs": {"x": ["f%d" % i for i in range(8)]}})
        self.assertEqual(status, 201, doc)
        C.wait_until(self, "the job to succeed", lambda: s.get_json("/v2/jobs/" + doc["id"])[1]["state"] == "succeeded",
                     timeout=120)
        body = self.infer("scorer", x[4], key="k4")  # the job's answer, from Redis
        self.assertEqual(body["parameters"]["source"], "precomputed")
        C.assert_matches_torch(self.y(body), ref[4])
        self.redis.cli("HSET", "scores:k7", "y", "[7.25,-8,9]")  # a distinctive answer
        body = self.infer("scorer", x[7], key="k7")
        self.assertEqual(body["parameters"]["source"], "precomputed")
        np.testing.assert_array_equal(self.y(body), np.array([7.25, -8, 9], np.float32))
        self.redis.cli("HSET", "scores:k8", "model_version", "0")  # another version's row
        self.assertEqual(self.infer("scorer", x[8], key="k8")["parameters"]["source"], "online")

        self.redis.stop()  # Redis goes away: answered online
        body = self.infer("scorer", x[7], key="k7")
        self.assertEqual(body["parameters"]["source"], "online")
        C.assert_matches_torch(self.y(body), ref[7])
        self.redis.start()  # back, empty (no persistence): plant the row again
        self.redis.cli("HSET", "scores:k7", "id", "k7", "model_name", "scorer", "model_version", "1",
                       "predicted_at", str(time.time()), "y", "[7.25,-8,9]")

        def from_table():
            status, body = s.post_json("/v2/models/scorer/infer", ic.v2_json_request(
                {"x": x[7].reshape(1, 8)}, params={"id": "k7"}))
            self.assertEqual(status, 200, body)
            return body["parameters"]["source"] == "precomputed"
        C.wait_until(self, "Redis to answer again", from_table, timeout=60)

    def _strict_ok(self, x):
        status, body = self.server.post_json("/v2/models/pg_strict/infer", ic.v2_json_request(
            {"x": x[0].reshape(1, 8)}, params={"id": "pg_strict-k0"}))
        if status == 503:
            return False
        self.assertEqual(status, 200, body)
        return body["parameters"]["source"] == "precomputed"


if __name__ == "__main__":
    unittest.main()
