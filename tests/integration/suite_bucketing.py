"""Integration suite: sequence bucketing and adaptive batching (docs/batching.md).
A BERT-style encoder, as TorchScript and as ONNX, gets concurrent requests of
mixed lengths; each answer must be what the PyTorch module returns for that
request alone (run by run_tests.py)."""
import concurrent.futures
import os
import re
import sys
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bucketing_fixtures as B  # noqa: E402
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

# The fixture models the shared server (C.SERVER) serves.
setUpModule = C.serving("bucket_encoder_adaptive", "bucket_encoder_onnx", "bucket_encoder_ts", "ragged_sum")

TOL = 1e-5


class Bucketing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.module = B.module()

    def reference(self, tokens):
        with torch.no_grad():
            t = torch.from_numpy(tokens)
            hidden, logits = self.module(t, torch.ones_like(t))
        return hidden.numpy(), logits.numpy()

    def stats(self, model):
        st, js = C.SERVER.get_json("/v2/models/%s/versions/1/stats" % model)
        self.assertEqual(st, 200, js)
        return js["model_stats"][0]

    def infer(self, model, tokens, send_mask):
        inputs = {"tokens": tokens}
        if send_mask:
            inputs["mask"] = np.ones_like(tokens)
        st, js = C.SERVER.post_json("/v2/models/%s/infer" % model, ic.v2_json_request(inputs))
        return st, js

    def check_mixed_lengths(self, model, n=24, seed=0):
        rng = np.random.default_rng(seed)
        lengths = [int(x) for x in rng.integers(3, B.MAX_LEN + 1, size=n)]
        requests = [rng.integers(1, 100, size=(1, length)).astype(np.int64) for length in lengths]
        before = self.stats(model)
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(lambda i: self.infer(model, requests[i], i % 2 == 0), range(n)))
        for tokens, (st, js) in zip(requests, answers):
            self.assertEqual(st, 200, js)
            out = {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"]) for o in js["outputs"]}
            want_hidden, want_logits = self.reference(tokens)
            self.assertEqual(list(out["hidden"].shape), [1, tokens.shape[1], 32])  # cut back to its own length
            np.testing.assert_allclose(out["hidden"], want_hidden, atol=TOL, rtol=0)
            np.testing.assert_allclose(out["logits"], want_logits, atol=TOL, rtol=0)
        after = self.stats(model)
        executions = after["execution_count"] - before["execution_count"]
        self.assertLess(executions, n, "requests of different lengths were batched together")
        padded = after["batching"]["padded_elements"] - before["batching"]["padded_elements"]
        real = after["batching"]["real_elements"] - before["batching"]["real_elements"]
        self.assertEqual(real, sum(lengths))
        self.assertGreaterEqual(padded, real)
        # Buckets 16, 32, 64, 128: no request is padded past twice its length (or 16).
        self.assertLessEqual(padded, sum(max(16, 2 * x) for x in lengths))

    def test_torchscript_mixed_lengths_match_each_request_alone(self):
        self.check_mixed_lengths("bucket_encoder_ts", seed=1)

    def test_onnx_mixed_lengths_match_each_request_alone(self):
        self.check_mixed_lengths("bucket_encoder_onnx", seed=2)

    def test_adaptive_batching_shows_its_estimates(self):
        model = "bucket_encoder_adaptive"
        for seed in range(3):
            self.check_mixed_lengths(model, n=16, seed=10 + seed)
        b = self.stats(model)["batching"]
        self.assertEqual(b["mode"], "adaptive")
        self.assertGreaterEqual(b["cost_samples"], 3)
        self.assertGreaterEqual(b["arrival_rows_per_s"], 0)
        for key in ("cost_fixed_us", "cost_per_row_us", "cost_per_position_us", "waits", "wait_us_total"):
            self.assertIn(key, b)
        self.assertTrue(0 <= b["cpu_utilization"] <= 1, b)
        metrics = C.SERVER.metrics()
        for name in ("inferd_batching_arrival_rate", "inferd_batching_cost_per_row_us", "inferd_batching_waits_total",
                     "inferd_batching_cpu_utilization", "inferd_padding_elements_total"):
            self.assertTrue(re.search(r'^%s\{model="%s",version="1"\} ' % (name, model), metrics, re.M), name)

    def test_ragged_inputs_batch_and_each_request_gets_its_own_answer(self):
        model = "ragged_sum"
        ragged = torch.jit.load(os.path.join(C.REPO, model, "1", "model.pt"))
        rng = np.random.default_rng(5)
        requests = [rng.standard_normal((1, int(n))).astype(np.float32) for n in rng.integers(1, 40, size=16)]
        before = self.stats(model)["execution_count"]

        def infer(x):
            return C.SERVER.post_json("/v2/models/%s/infer" % model, ic.v2_json_request({"x": x}))

        with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
            answers = list(pool.map(infer, requests))
        for x, (st, js) in zip(requests, answers):
            self.assertEqual(st, 200, js)
            out = js["outputs"][0]
            self.assertEqual(out["shape"], [1, 2])
            with torch.no_grad():  # the model alone on this request: its elements and offsets [0, n]
                want = ragged(torch.from_numpy(x.reshape(-1)), torch.tensor([0, x.shape[1]])).numpy()
            np.testing.assert_allclose(np.array(out["data"], np.float32).reshape(1, 2), want, atol=1e-5, rtol=0)
        self.assertLess(self.stats(model)["execution_count"] - before, len(requests))
        st, js = C.SERVER.post_json("/v2/models/%s/infer" % model,
                                    ic.v2_json_request({"x": np.ones((2, 3), np.float32)}))
        self.assertEqual(st, 400, js)
        self.assertIn("batch size 1", js["error"])

    def test_padded_inputs_of_one_request_must_agree_in_length(self):
        tokens = np.ones((1, 7), np.int64)
        st, js = C.SERVER.post_json("/v2/models/bucket_encoder_ts/infer",
                                    ic.v2_json_request({"tokens": tokens, "mask": np.ones((1, 5), np.int64)}))
        self.assertEqual(st, 400, js)
        self.assertIn("same length", js["error"])


if __name__ == "__main__":
    unittest.main()
