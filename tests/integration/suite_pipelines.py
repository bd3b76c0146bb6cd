"""Integration suite: pipelines (Triton's ensembles; run by run_tests.py)."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

# The fixture models the shared server (C.SERVER) serves.
setUpModule = C.serving("bad_ens_cycle", "bad_ens_dtype", "bad_ens_loop_a", "bad_ens_loop_b", "bad_ens_never",
                        "bad_ens_shape", "bad_ens_twice", "bad_ens_unknown", "mlp", "mlp_labels", "pipe_branches",
                        "pipe_chain", "pipe_three", "py_preprocess", "scale2")


def _stats(model):
    st, js = C.SERVER.get_json("/v2/models/%s/versions/1/stats" % model)
    assert st == 200, js
    return js["model_stats"][0]


class Pipelines(unittest.TestCase):
    def assert_close(self, got, want):
        np.testing.assert_allclose(np.asarray(got, np.float32).reshape(want.shape), want, rtol=1e-5, atol=1e-5)

    def test_a_chain_matches_the_same_models_run_in_python_over_json_binary_and_grpc(self):
        x = np.random.default_rng(7).standard_normal((3, 8)).astype(np.float32)
        want = C.torch_ref("mlp", 2 * x)  # scale2, then mlp
        st, js = C.SERVER.post_json("/v2/models/pipe_chain/infer", ic.v2_json_request({"raw": x}))
        self.assertEqual(st, 200, js)
        self.assertEqual((js["model_name"], js["model_version"]), ("pipe_chain", "1"))
        self.assertEqual(js["outputs"][0]["name"], "logits")
        self.assert_close(js["outputs"][0]["data"], want)
        body, hlen = ic.v2_binary_request({"raw": x})
        st, hdrs, data = C.SERVER.request("POST", "/v2/models/pipe_chain/versions/1/infer", body,
                                          {"Inference-Header-Content-Length": str(hlen)})
        self.assertEqual(st, 200, data[:300])
        self.assert_close(ic.decode_v2_response(hdrs, data)[1]["logits"], want)
        import grpc
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
            resp = s.pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(
                gc.infer_request(s.pb, "pipe_chain", {"raw": x}), timeout=60)
        self.assert_close(gc.outputs_of(resp)["logits"], want)
        # The classification extension on the ensemble's labelled output.
        st, js = C.SERVER.post_json("/v2/models/pipe_chain/infer", ic.v2_json_request(
            {"raw": x}, outputs=[{"name": "logits", "parameters": {"classification": 1}}]))
        self.assertEqual(st, 200, js)
        labels = ["cat", "dog", "bird"]
        top = [int(np.argmax(row)) for row in want]
        got = [v.split(":") for v in js["outputs"][0]["data"]]
        self.assertEqual([(int(i), label) for _, i, label in got], [(i, labels[i]) for i in top])
        for (value, _, _), row, i in zip(got, want, top):
            self.assertEqual(value, "%f" % row[i])

    def test_parallel_branches_and_a_subset_of_outputs(self):
        x = np.random.default_rng(8).standard_normal((2, 8)).astype(np.float32)
        st, js = C.SERVER.post_json("/v2/models/pipe_branches/infer", ic.v2_json_request({"raw": x}))
        self.assertEqual(st, 200, js)
        outs = {o["name"]: o["data"] for o in js["outputs"]}
        self.assertEqual(sorted(outs), ["direct", "doubled", "via_scale"])
        self.assert_close(outs["direct"], C.torch_ref("mlp", x))
        self.assert_close(outs["via_scale"], C.torch_ref("mlp", 2 * x))
        self.assert_close(outs["doubled"], 2 * x)
        st, js = C.SERVER.post_json("/v2/models/pipe_branches/infer", ic.v2_json_request(
            {"raw": x}, outputs=[{"name": "via_scale"}]))
        self.assertEqual(st, 200, js)
        self.assertEqual([o["name"] for o in js["outputs"]], ["via_scale"])

    def test_an_ensemble_is_listed_addressed_and_counted_like_a_model_and_each_step_counts_too(self):
        st, md = C.SERVER.get_json("/v2/models/pipe_chain")
        self.assertEqual(st, 200, md)
        self.assertEqual((md["platform"], md["versions"]), ("ensemble", ["1"]))
        self.assertEqual(md["inputs"], [{"name": "raw", "datatype": "FP32", "shape": [-1, 8]}])
        st, cfg = C.SERVER.get_json("/v2/models/pipe_chain/config")
        self.assertEqual([s["model_name"] for s in cfg["ensemble_scheduling"]["step"]], ["scale2", "mlp"])
        before = {m: _stats(m)["inference_count"] for m in ("pipe_chain", "scale2", "mlp")}
        x = np.ones((4, 8), np.float32)
        st, js = C.SERVER.post_json("/v2/models/pipe_chain/infer", ic.v2_json_request({"raw": x}))
        self.assertEqual(st, 200, js)
        after = {m: _stats(m)["inference_count"] for m in ("pipe_chain", "scale2", "mlp")}
        self.assertEqual({m: after[m] - before[m] for m in after}, {"pipe_chain": 4, "scale2": 4, "mlp": 4})
        st, index = C.SERVER.post_json("/v2/repository/index", {})
        entry = [m for m in index if m["name"] == "pipe_chain"][0]
        self.assertEqual(entry["state"], "READY", entry)

    def test_invalid_ensembles_fail_their_load_with_the_step_and_tensor_named(self):
        expect = {
            "bad_ens_unknown": "step 0 (model 'no_such_model'): model 'no_such_model' is not in the repository",
            "bad_ens_cycle": "the ensemble's steps form a cycle: step 0 (model 'scale2'), step 1 (model 'scale2')",
            "bad_ens_twice": "tensor 'out' is produced twice: by step 0 (model 'scale2') and by step 1 (model 'mlp')"
                             " output 'y'",
            "bad_ens_never": "step 0 (model 'scale2'): input 'x' reads tensor 'ghost', which no step produces",
            "bad_ens_dtype": "step 0 (model 'mlp'): input 'x' reads tensor 'ids' (ensemble input 'ids'), which is "
                             "INT64; the model takes FP32",
            "bad_ens_shape": "step 0 (model 'mlp'): input 'x' reads tensor 'raw' (ensemble input 'raw'), of shape "
                             "[-1,5]; the model takes [-1,8]",
            "bad_ens_loop_a": "ensembles call each other in a cycle",
            "bad_ens_loop_b": "ensembles call each other in a cycle",
        }
        C.assert_failed_loads(self, expect, {"raw": np.zeros((1, 8), np.float32)})
        # The models the bad ensembles name still serve.
        st, js = C.SERVER.post_json("/v2/models/scale2/infer", ic.v2_json_request({"x": np.ones((1, 8), np.float32)}))
        self.assertEqual(st, 200, js)
        self.assertEqual(js["outputs"][0]["data"], [2.0] * 8)

    def test_under_on_demand_residency_an_ensemble_loads_its_steps_on_its_first_request(self):
        server = ic.Server(C.ARGS.inferd, C.SERVED, "--model-residency", "on-demand", "--memory-budget", "2GiB")
        try:
            states = lambda: {e["name"]: e["state"] for e in server.post_json("/v2/repository/index", {})[1]}  # noqa
            before = states()
            self.assertEqual((before["pipe_three"], before["py_preprocess"], before["mlp"]),
                             ("UNAVAILABLE", "UNAVAILABLE", "UNAVAILABLE"))
            st, js = server.post_json("/v2/models/pipe_three/infer", {"inputs": [
                {"name": "csv", "datatype": "BYTES", "shape": [1, 1], "data": [",".join(["0.5"] * 8)]}],
                "outputs": [{"name": "label"}]})
            self.assertEqual(st, 200, js)
            self.assertIn(js["outputs"][0]["data"][0], ["cat", "dog", "bird", "others"])
            after = states()
            self.assertEqual((after["pipe_three"], after["py_preprocess"], after["mlp"]), ("READY", "READY", "READY"))
        finally:
            self.assertEqual(server.stop(), 0)

    def test_output_rules_match_numpy_and_are_listed_in_the_metadata(self):
        x = np.random.default_rng(9).standard_normal((6, 8)).astype(np.float32) * 3
        logits = C.torch_ref("mlp", x)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = e / e.sum(axis=1, keepdims=True)
        labels = ["cat", "dog", "bird"]
        top = probs.argmax(axis=1)
        want_label = [labels[i] if probs[r, i] >= 0.6 else "others" for r, i in enumerate(top)]
        self.assertGreater(len(set(want_label)), 1, want_label)  # the threshold matters for this input
        pet = {"cat": "pet", "dog": "pet", "bird": "bird"}
        want_top2 = [[pet[labels[i]] for i in sorted(range(3), key=lambda c: (-logits[r, c], c))[:2]]
                     for r in range(6)]
        st, md = C.SERVER.get_json("/v2/models/mlp_labels")
        self.assertEqual(st, 200, md)
        self.assertEqual(md["outputs"], [
            {"name": "y", "datatype": "FP32", "shape": [-1, 3]},
            {"name": "confidence", "datatype": "FP32", "shape": [-1, 1]},
            {"name": "label", "datatype": "BYTES", "shape": [-1, 1]},
            {"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]},
            {"name": "top2", "datatype": "BYTES", "shape": [-1, 2]}])
        # No outputs named: the model's output and every rule's.
        st, js = C.SERVER.post_json("/v2/models/mlp_labels/infer", ic.v2_json_request({"x": x}))
        self.assertEqual(st, 200, js)
        outs = {o["name"]: o for o in js["outputs"]}
        self.assertEqual(sorted(outs), ["confidence", "label", "probabilities", "top2", "y"])
        self.assert_close(outs["y"]["data"], logits)
        self.assert_close(outs["probabilities"]["data"], probs)
        self.assert_close(outs["confidence"]["data"], probs.max(axis=1).reshape(6, 1))
        self.assertEqual((outs["label"]["datatype"], outs["label"]["shape"]), ("BYTES", [6, 1]))
        self.assertEqual(outs["label"]["data"], want_label)
        self.assertEqual(np.array(outs["top2"]["data"]).reshape(6, 2).tolist(), want_top2)
        # Only the label: the model still computes y, the answer has the label alone; over gRPC too.
        st, js = C.SERVER.post_json("/v2/models/mlp_labels/infer", ic.v2_json_request(
            {"x": x}, outputs=[{"name": "label"}]))
        self.assertEqual(st, 200, js)
        self.assertEqual([o["name"] for o in js["outputs"]], ["label"])
        self.assertEqual(js["outputs"][0]["data"], want_label)
        import grpc
        s = C.stubs()
        with grpc.insecure_channel("127.0.0.1:%d" % C.SERVER.grpc_port) as ch:
            resp = s.pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(
                gc.infer_request(s.pb, "mlp_labels", {"x": x}, outputs=["label", "confidence"]), timeout=60)
        got = gc.outputs_of(resp)
        self.assertEqual([v.decode() for v in got["label"]], want_label)
        self.assert_close(got["confidence"], probs.max(axis=1).reshape(6, 1))


if __name__ == "__main__":
    unittest.main()
