"""Integration suite: models quantised at load time (parameter quantization "int8", docs/quantization.md) and the
accuracy guard, over the trained digits classifier (quant_fixtures.py). The int8 answers are checked against the
same ONNX file served in FP32 (digits_onnx, itself checked against PyTorch in suite_frameworks) on the 450
held-out digits (run by run_tests.py)."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
import quant_fixtures as Q  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

setUpModule = C.serving("digits", "quant_digits_ts", "quant_resnet_ts", "digits_onnx", "onnx_cnn", "quant_cnn", "quant_digits", "quant_digits_strict", "quant_digits_warmup",
                        "quant_digits_nodata", "quant_digits_unchecked", "quant_digits_badcal")


class Quantization(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        _, cls.x, cls.y = Q.digits_split()

    def probabilities(self, model, x):
        st, js = C.SERVER.post_json("/v2/models/%s/infer" % model, ic.v2_json_request({"pixels": x}))
        self.assertEqual(st, 200, js)
        out = js["outputs"][0]
        return np.array(out["data"], np.float32).reshape(out["shape"])

    def all_probabilities(self, model):
        return np.concatenate([self.probabilities(model, self.x[i:i + 32]) for i in range(0, len(self.x), 32)])

    def index_entry(self, model):
        st, index = C.SERVER.post_json("/v2/repository/index", {})
        self.assertEqual(st, 200, index)
        return [m for m in index if m["name"] == model][0]

    def quantization_stats(self, model):
        st, js = C.SERVER.get_json("/v2/models/%s/stats" % model)
        self.assertEqual(st, 200, js)
        return js["model_stats"][0]["quantization"]

    def test_torchscript_linear_layers_serve_int8_and_agree_with_fp32(self):
        # digits (FP32 TorchScript, checked against PyTorch in suite_frameworks) and the same model.pt with
        # quantization "int8": its two nn.Linear layers on the int8 kernels, through the guard.
        fp32 = self.all_probabilities("digits")
        int8 = self.all_probabilities("quant_digits_ts")
        self.assertEqual(int8.shape, (450, 10))
        self.assertGreaterEqual(float((int8.argmax(1) == fp32.argmax(1)).mean()), 0.99)
        self.assertGreater(float((int8.argmax(1) == self.y).mean()), 0.9)
        diff = np.abs(int8 - fp32)
        self.assertLess(float(diff.max()), 0.1)
        self.assertGreater(float(diff.max()), 0.0)  # int8 really serves
        q = self.quantization_stats("quant_digits_ts")
        self.assertEqual((q["requested"], q["serving"]), ("int8", "int8"), q)
        self.assertEqual(q["layers"], 2, q)
        self.assertEqual(q["weight_bytes_fp32"], 4 * (64 * 64 + 64 * 10), q)
        self.assertLess(q["weight_bytes_int8"], 0.35 * q["weight_bytes_fp32"], q)
        self.assertEqual(q["data"], "calibration.json", q)
        self.assertGreaterEqual(q["top1_agreement"], 0.95, q)

    def test_int8_serves_when_the_guard_passes_and_agrees_with_fp32_on_held_out_digits(self):
        fp32 = self.all_probabilities("digits_onnx")
        int8 = self.all_probabilities("quant_digits")
        self.assertEqual(int8.shape, (450, 10))
        agreement = float((int8.argmax(1) == fp32.argmax(1)).mean())
        self.assertGreaterEqual(agreement, 0.99)
        self.assertGreater(float((int8.argmax(1) == self.y).mean()), 0.9)  # still a digits classifier
        diff = np.abs(int8 - fp32)
        self.assertLess(float(diff.max()), 0.1)
        self.assertGreater(float(diff.max()), 0.0)  # int8 really serves: not FP32's bits
        q = self.quantization_stats("quant_digits")
        self.assertEqual((q["requested"], q["serving"]), ("int8", "int8"), q)
        self.assertEqual(q["layers"], 2, q)  # both Gemms
        self.assertEqual(q["weight_bytes_fp32"], 4 * (64 * 64 + 64 * 10), q)
        self.assertLess(q["weight_bytes_int8"], 0.35 * q["weight_bytes_fp32"], q)
        self.assertEqual(q["data"], "calibration.json", q)
        self.assertEqual(q["rows"], 64, q)
        self.assertGreaterEqual(q["top1_agreement"], 0.99, q)
        self.assertGreater(q["speedup"], 0, q)
        self.assertIn(q["kernel"], ("avx512vnni", "avx2", "portable"), q)
        self.assertIn("output 'probabilities' top-1 agreement", q["reason"])
        entry = self.index_entry("quant_digits")
        self.assertEqual(entry["state"], "READY", entry)
        self.assertTrue(entry["reason"].startswith("int8: 2 weights"), entry)
        metrics = C.SERVER.metrics()
        self.assertIn('inferd_model_quantization{model="quant_digits",version="1",requested="int8",serving="int8"} 1',
                      metrics)
        self.assertIn('inferd_model_quantization{model="quant_digits_strict",version="1",requested="int8",'
                      'serving="fp32"} 1', metrics)
        self.assertNotIn('inferd_model_quantization{model="digits_onnx"', metrics)

    def test_the_guard_rejects_int8_beyond_the_tolerance_and_fp32_serves(self):
        entry = self.index_entry("quant_digits_strict")
        self.assertEqual(entry["state"], "READY", entry)
        self.assertIn("FP32 serves (int8 asked for)", entry["reason"])
        self.assertIn("int8 rejected by the accuracy guard: output 'probabilities' relative error", entry["reason"])
        self.assertIn("> 1e-09", entry["reason"])
        q = self.quantization_stats("quant_digits_strict")
        self.assertEqual(q["serving"], "fp32", q)
        self.assertGreater(q["relative_error"], 1e-9, q)
        np.testing.assert_allclose(self.probabilities("quant_digits_strict", self.x[:32]),
                                   self.probabilities("digits_onnx", self.x[:32]), rtol=0, atol=1e-6)
        st, listing = C.SERVER.get_json("/v2/repository/models")
        self.assertEqual(st, 200, listing)
        model = [m for m in listing["models"] if m["name"] == "quant_digits_strict"][0]
        self.assertIn("int8 rejected", model["versions"][0]["reason"], model)

    def test_the_guard_runs_the_warmup_samples_when_there_is_no_calibration_file(self):
        q = self.quantization_stats("quant_digits_warmup")
        self.assertEqual(q["data"], "model_warmup", q)
        self.assertEqual(q["rows"], 32, q)
        self.assertEqual(q["serving"], "int8", q)
        self.assertLess(q["relative_error"], 0.05, q)

    def test_without_data_to_check_against_fp32_serves_and_says_why(self):
        q = self.quantization_stats("quant_digits_nodata")
        self.assertEqual(q["serving"], "fp32", q)
        self.assertIn("no data to check int8 against", q["reason"])
        self.assertIn("no data to check int8 against", self.index_entry("quant_digits_nodata")["reason"])

    def test_guard_off_serves_int8_unchecked(self):
        q = self.quantization_stats("quant_digits_unchecked")
        self.assertEqual(q["serving"], "int8", q)
        self.assertEqual(q["rows"], 0, q)
        self.assertIn("not checked (quantization.guard off)", q["reason"])
        fp32 = self.probabilities("digits_onnx", self.x[:32])
        int8 = self.probabilities("quant_digits_unchecked", self.x[:32])
        self.assertGreaterEqual(float((int8.argmax(1) == fp32.argmax(1)).mean()), 0.95)

    def test_convolutions_run_in_int8_close_to_fp32(self):
        q = self.quantization_stats("quant_cnn")
        self.assertEqual(q["serving"], "int8", q)
        self.assertEqual(q["layers"], 3, q)  # both convolutions and the Gemm
        self.assertEqual(q["data"], "model_warmup", q)
        x = np.random.default_rng(3).normal(size=(16, 3, 16, 16)).astype(np.float32)  # signed inputs too
        outs = {}
        for model in ("onnx_cnn", "quant_cnn"):
            st, js = C.SERVER.post_json("/v2/models/%s/infer" % model, ic.v2_json_request({"image": x}))
            self.assertEqual(st, 200, js)
            outs[model] = np.array(js["outputs"][0]["data"], np.float32).reshape(16, 5)
        fp32, int8 = outs["onnx_cnn"], outs["quant_cnn"]
        rel = float(np.linalg.norm(int8 - fp32) / np.linalg.norm(fp32))
        self.assertLess(rel, 0.05)
        self.assertGreater(rel, 0.0)
        self.assertGreaterEqual(float((int8.argmax(1) == fp32.argmax(1)).mean()), 0.8)

    def test_torchscript_convolutions_run_in_int8_close_to_pytorch(self):
        # resnet18's traced file (aten::_convolution after freezing, batch norms folded) against PyTorch running it.
        q = self.quantization_stats("quant_resnet_ts")
        self.assertEqual((q["requested"], q["serving"]), ("int8", "int8"), q)
        self.assertEqual(q["layers"], 21, q)  # 20 convolutions and the classifier
        self.assertLess(q["weight_bytes_int8"], 0.3 * q["weight_bytes_fp32"], q)
        x = np.random.default_rng(4).random((2, 3, 224, 224), dtype=np.float32)
        want = C.torch_ref("resnet18", x)
        st, js = C.SERVER.post_json("/v2/models/quant_resnet_ts/infer", ic.v2_json_request({"image": x}))
        self.assertEqual(st, 200, js)
        got = np.array(js["outputs"][0]["data"], np.float32).reshape(want.shape)
        rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        self.assertLess(rel, 0.1)
        self.assertGreater(rel, 0.0)

    def test_a_bad_calibration_file_fails_the_load_naming_it_and_the_rest_serve(self):
        entry = self.index_entry("quant_digits_badcal")
        self.assertEqual(entry["state"], "UNAVAILABLE", entry)
        self.assertIn("quantization.calibration: calibration.json", entry["reason"])
        self.assertIn("datatype INT32 is not the input's FP32", entry["reason"])
        self.assertEqual(self.index_entry("quant_digits")["state"], "READY")


if __name__ == "__main__":
    unittest.main()
