"""Integration suite: online feature lookup from Redis (run by run_tests.py).

Models are copies of the `mlp` fixture whose input `x` (8 floats) comes from a Redis hash `user:<id>` (fields
f0..f7); answers are compared with the same TorchScript model run by python3-torch on the same eight values."""
import json
import os
import shutil
import sys
import threading
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401
import inferd_client as ic  # noqa: E402
import redis_server  # noqa: E402

NAMES = ["f%d" % i for i in range(8)]



def feature_model(repo, name, **params):
    """A copy of the mlp fixture named `name` whose input x comes from the Redis hash user:<user_id>."""
    base = {"connection": "online", "key_parameter": "user_id", "key_prefix": "user:", "input": "x",
            "names": ",".join(NAMES)}
    base.update(params)
    C.copy_model(repo, name, {"features." + k: v for k, v in base.items()})


class Features(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.abspath(os.path.join(C.ARGS.workdir, "features", self._testMethodName))
        shutil.rmtree(self.dir, ignore_errors=True)
        self.repo = os.path.join(self.dir, "repo")
        os.makedirs(self.repo)
        self.redis = redis_server.RedisServer()
        self.server = None

    def tearDown(self):
        try:
            if self.server:
                self.assertEqual(self.server.stop(), 0, "".join(self.server.log[-30:]))
        finally:  # a failed stop must not leave Redis running
            self.redis.close()

    def start(self, *models):
        config = os.path.join(self.dir, "jobs.json")
        with open(config, "w") as f:
            json.dump({"connections": {"online": {"type": "redis", "port": self.redis.port}}}, f)
        args = []
        for m in models:
            args += ["--load-model", m]
        self.server = ic.Server(C.ARGS.inferd, self.repo, "--control-state-dir", os.path.join(self.dir, "state"),
                                "--jobs-config", config, "--model-control-mode", "explicit", *args)
        return self.server

    def put_users(self, n, seed):
        x = np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)
        for i in range(n):
            args = []
            for name, v in zip(NAMES, x[i]):
                args += [name, repr(float(v))]  # the float32 value exactly
            self.redis.cli("HSET", "user:u%d" % i, *args)
        return x

    def infer(self, model, user, expect=200, inputs=None):
        status, body = self.server.post_json("/v2/models/%s/infer" % model,
                                             {"inputs": inputs or [], "parameters": {"user_id": user}})
        self.assertEqual(status, expect, body)
        return body

    @staticmethod
    def y(body):
        return np.array(body["outputs"][0]["data"], np.float32).reshape(body["outputs"][0]["shape"])

    def test_features_are_joined_from_redis_and_match_pytorch(self):
        feature_model(self.repo, "scorer")
        x = self.put_users(64, 3)
        ref = C.torch_ref("mlp", x)
        s = self.start("scorer")
        C.assert_matches_torch(self.y(self.infer("scorer", "u5")), ref[5:6])
        # Many clients at once: every answer is its own user's (fetches go out pipelined).
        got, errors = {}, []

        def client(ids):
            c = s.conn()
            try:
                for i in ids:
                    status, body = s.post_json("/v2/models/scorer/infer",
                                               {"inputs": [], "parameters": {"user_id": "u%d" % i}}, conn=c)
                    if status != 200:
                        errors.append(body)
                    else:
                        got[i] = self.y(body)
            finally:
                c.close()
        threads = [threading.Thread(target=client, args=(range(k, 64, 8),)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.assertEqual(errors, [])
        C.assert_matches_torch(np.concatenate([got[i] for i in range(64)]), ref)
        # The client's own input wins over Redis.
        mine = np.full((1, 8), 0.5, np.float32)
        body = self.infer("scorer", "u5", inputs=ic.v2_json_request({"x": mine})["inputs"])
        C.assert_matches_torch(self.y(body), C.torch_ref("mlp", mine))
        m = s.metrics()
        self.assertIn('inferd_feature_lookups_total{model="scorer",result="fetched"} 65', m)
        self.assertIn('inferd_feature_fetches_total{connection="online"} 65', m)
        trips = C.metric(m, 'inferd_feature_round_trips_total{connection="online"}')
        self.assertGreaterEqual(trips, 1)
        self.assertLessEqual(trips, 65)

    def test_missing_entities_and_features_are_404_or_defaults(self):
        feature_model(self.repo, "scorer")
        feature_model(self.repo, "scorer_defaults", defaults="0")
        x = self.put_users(2, 4)
        self.redis.cli("HDEL", "user:u1", "f3")
        self.redis.cli("HSET", "user:bad", *sum([[n, "1"] for n in NAMES[:7]], []), "f7", "lots")
        s = self.start("scorer", "scorer_defaults")
        body = self.infer("scorer", "ghost", expect=404)
        self.assertIn("entity 'ghost' has no features in Redis (key 'user:ghost')", body["error"])
        body = self.infer("scorer", "u1", expect=404)
        self.assertIn("entity 'u1' lacks feature f3 in Redis (key 'user:u1') and it has no default", body["error"])
        zeros = np.zeros((1, 8), np.float32)
        C.assert_matches_torch(self.y(self.infer("scorer_defaults", "ghost")), C.torch_ref("mlp", zeros))
        one_missing = x[1:2].copy()
        one_missing[0, 3] = 0
        C.assert_matches_torch(self.y(self.infer("scorer_defaults", "u1")), C.torch_ref("mlp", one_missing))
        body = self.infer("scorer", "bad", expect=500)
        self.assertIn("feature 'f7' of entity 'bad' is 'lots' in Redis, not a number", body["error"])
        status, body = s.post_json("/v2/models/scorer/infer", {"inputs": [], "parameters": {"user_id": True}})
        self.assertEqual(status, 400, body)
        status, body = s.post_json("/v2/models/scorer/infer", {"inputs": []})  # no key: the input is missing
        self.assertEqual(status, 400, body)
        m = s.metrics()
        self.assertIn('inferd_feature_lookups_total{model="scorer",result="missing"} 2', m)
        self.assertIn('inferd_feature_lookups_total{model="scorer",result="error"} 1', m)
        self.assertIn('inferd_feature_lookups_total{model="scorer_defaults",result="defaulted"} 2', m)

    def test_redis_stopped_mid_traffic_is_503_and_recovers_when_it_returns(self):
        feature_model(self.repo, "scorer")
        x = self.put_users(1, 5)
        ref = C.torch_ref("mlp", x)
        self.start("scorer")
        C.assert_matches_torch(self.y(self.infer("scorer", "u0")), ref)
        self.redis.stop()
        body = self.infer("scorer", "u0", expect=503)
        self.assertIn("Redis connection 'online' is down", body["error"])
        self.redis.start()  # the same port, empty (no persistence)
        self.put_users(1, 5)

        def answers():
            status, body = self.server.post_json("/v2/models/scorer/infer",
                                                 {"inputs": [], "parameters": {"user_id": "u0"}})
            if status == 503:
                return False  # reconnects at most once a second
            self.assertEqual(status, 200, body)
            return True
        C.wait_until(self, "Redis to answer again", answers, timeout=60)
        C.assert_matches_torch(self.y(self.infer("scorer", "u0")), ref)

    def test_bad_configs_are_clear_errors(self):
        feature_model(self.repo, "unknown_conn", connection="nowhere")
        feature_model(self.repo, "wrong_count", names="a,b,c")
        s = self.start()
        status, body = s.post_json("/v2/repository/models/unknown_conn/load", {})
        self.assertEqual(status, 503, body)
        self.assertIn("features.connection 'nowhere' is not a redis connection", body["error"])
        status, body = s.post_json("/v2/repository/models/wrong_count/load", {})
        self.assertEqual(status, 400, body)
        self.assertIn("input 'x' holds 8 elements; 3 features are listed", body["error"])


if __name__ == "__main__":
    unittest.main()
