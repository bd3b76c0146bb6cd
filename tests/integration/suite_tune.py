"""Integration suite: `inferd tune` (docs/tune.md) over fixture models, with short measurements: the search runs
child servers, writes a config that a fresh server loads and serves as chosen, never overwrites one without
--force, tries int8 only where the backend quantizes and the guard lets it serve, and refuses what it cannot tune
(run by run_tests.py). Speed is not judged: every check holds whichever settings win on the machine."""
import json
import os
import shutil
import struct
import subprocess
import sys
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401

# Short measurements: the checks hold at any speed (a sanitizer build is slow, not wrong).
QUICK = ["--warmup-s", "0.2", "--window-s", "0.3", "--max-concurrency", "4", "--time-budget-s", "240",
         "--load-timeout-s", "120"]


def workdir(name):
    d = os.path.abspath(os.path.join(C.ARGS.workdir, "tune", name))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def png_size(path):
    """(width, height) of a PNG whose every chunk's CRC holds and whose pixels inflate to the right size."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, size = 8, b"", None
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        if kind == b"IDAT":
            idat += body
        at += 12 + length
    assert len(zlib.decompress(idat)) == size[1] * (1 + 3 * size[0])
    return size


class Tune(unittest.TestCase):
    def tune(self, model, out, *extra, timeout=600):
        cmd = [C.ARGS.inferd, "tune", "-m", model, "--model-repository", C.REPO, "--output-dir", out, *QUICK, *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def report(self, out):
        with open(os.path.join(out, "report.json")) as f:
            return json.load(f)

    def test_search_writes_a_config_a_server_serves_as_chosen(self):
        out = workdir("tiny_mlp")
        p = self.tune("tiny_mlp", out, "--p99-ms", "2000", "--max-candidates", "4", "--protocols", "v2-json,grpc",
                      "--core-hour-usd", "0.036")
        self.assertEqual(p.returncode, 0, p.stderr)
        # Progress while it runs: each candidate, each concurrency level.
        self.assertIn("[1] 0:00 1 instance x 1 thread", p.stderr)
        self.assertIn("(the model's own config)", p.stderr)
        self.assertIn("concurrency 1:", p.stderr)
        rep = self.report(out)
        self.assertEqual(rep["model"], "tiny_mlp")
        self.assertEqual(rep["objective_p99_ms"], 2000)
        cands = rep["candidates"]
        self.assertTrue(1 <= len(cands) <= 4, len(cands))
        self.assertEqual(rep["search"]["candidates_measured"], len(cands))
        self.assertLess(len(cands), rep["search"]["grid_size"])
        self.assertEqual(len({c["key"] for c in cands}), len(cands))  # nothing measured twice
        for c in cands:
            self.assertTrue(c["points"], c)
            self.assertEqual([pt["concurrency"] for pt in c["points"]][:2], [1, 2][:len(c["points"])])
            ok = [pt for pt in c["points"] if pt["errors"] == 0 and pt["p99_ms"] <= 2000]
            if c["feasible"]:
                best = max(ok, key=lambda pt: pt["predictions_per_s"])
                self.assertEqual(c["points"][c["operating_point"]], best)
                self.assertEqual(c["predictions_per_s"], best["predictions_per_s"])
            for pt in c["points"]:
                self.assertLessEqual(pt["p50_ms"], pt["p99_ms"])
                if pt["predictions_per_s"] > 0:
                    # Cost: $0.036 per core-hour = $1e-5 per core-second.
                    self.assertAlmostEqual(pt["usd_per_million_machine"],
                                           1e-5 * rep["machine"]["cores"] / pt["predictions_per_s"] * 1e6, places=9)
                    self.assertAlmostEqual(pt["usd_per_million_used"],
                                           1e-5 * pt["server_cores"] / pt["predictions_per_s"] * 1e6, places=9)
        chosen = cands[rep["chosen"]]
        self.assertTrue(chosen["feasible"])
        # A move is taken only for a gain above --min-gain (5%): no candidate beats the chosen one by more.
        self.assertGreaterEqual(chosen["predictions_per_s"] * 1.05,
                                max(c["predictions_per_s"] for c in cands if c["feasible"]))
        self.assertAlmostEqual(rep["chosen_vs_default"], chosen["predictions_per_s"] / cands[0]["predictions_per_s"])
        self.assertEqual(png_size(os.path.join(out, "throughput_vs_p99.png")), (760, 500))
        with open(os.path.join(out, "report.md")) as f:
            md = f.read()
        self.assertIn("per 1M predictions", md)
        self.assertIn("![throughput vs p99](throughput_vs_p99.png)", md)
        # The written config loads and serves with the chosen settings.
        with open(os.path.join(out, "config.pbtxt")) as f:
            config = f.read()
        self.assertTrue(config.startswith("# Written by `inferd tune`"), config)
        repo = os.path.join(out, "repo")
        os.makedirs(os.path.join(repo, "tiny_mlp"))
        os.symlink(os.path.abspath(os.path.join(C.REPO, "tiny_mlp", "1")), os.path.join(repo, "tiny_mlp", "1"))
        shutil.copy(os.path.join(out, "config.pbtxt"), os.path.join(repo, "tiny_mlp", "config.pbtxt"))
        server = ic.Server(C.ARGS.inferd, repo)
        try:
            st, cfg = server.get_json("/v2/models/tiny_mlp/config")
            self.assertEqual(st, 200, cfg)
            s = chosen["settings"]
            self.assertEqual(sum(g.get("count", 1) for g in cfg.get("instance_group", [{}])), s["instances"], cfg)
            self.assertEqual(cfg["parameters"]["INTRA_OP_THREAD_COUNT"]["string_value"], str(s["threads"]))
            self.assertEqual("dynamic_batching" in cfg, s["batching"] != "off", cfg)
            st, js = server.post_json("/v2/models/tiny_mlp/infer", ic.v2_json_request({"input": np.full((1, 16), 0.5, np.float32)}))
            self.assertEqual(st, 200, js)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_an_existing_config_is_never_overwritten_without_force(self):
        out = workdir("force")
        target = os.path.join(out, "config.pbtxt")
        with open(target, "w") as f:
            f.write("# mine\n")
        p = self.tune("tiny_mlp", out, "--p99-ms", "2000", "--write-config", target, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("exists: pass --force", p.stderr)
        self.assertNotIn("[1]", p.stderr)  # refused before measuring
        with open(target) as f:
            self.assertEqual(f.read(), "# mine\n")
        p = self.tune("tiny_mlp", out, "--p99-ms", "2000", "--write-config", target, "--force", "--max-candidates", "1",
                      "--search", "threads")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(target) as f:
            written = f.read()
        self.assertIn("# Written by `inferd tune`", written)
        self.assertIn("The model's own config was the best found", written)  # one candidate: the model's own
        self.assertIn('dynamic_batching { }', written)  # its text, unchanged

    def test_int8_is_tried_through_the_guard(self):
        out = workdir("int8")
        p = self.tune("quant_digits", out, "--p99-ms", "2000", "--search", "int8", "--protocols", "v2-binary",
                      "--protocol", "v2-binary")
        self.assertEqual(p.returncode, 0, p.stderr)
        cands = self.report(out)["candidates"]
        self.assertEqual([c["settings"]["int8"] for c in cands], [True, False])  # its own config asks for int8
        self.assertTrue(all(c["feasible"] and c["note"] == "" for c in cands), cands)
        # The guard refuses int8 for quant_digits_strict: its own config serves FP32 and says so.
        out = workdir("int8_strict")
        p = self.tune("quant_digits_strict", out, "--p99-ms", "2000", "--search", "int8", "--protocols", "v2-binary",
                      "--protocol", "v2-binary")
        self.assertEqual(p.returncode, 0, p.stderr)
        cands = self.report(out)["candidates"]
        self.assertIn("int8 asked for, not served", cands[0]["note"])
        self.assertIn("relative error", cands[0]["note"])
        self.assertTrue(cands[0]["feasible"])
        # A backend without int8 (XGBoost) has no int8 dimension.
        out = workdir("no_int8")
        p = self.tune("breast_cancer", out, "--p99-ms", "2000", "--max-candidates", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("int8", [d["name"] for d in self.report(out)["search"]["dimensions"]])

    def test_an_objective_nothing_meets_writes_no_config(self):
        out = workdir("unmet")
        p = self.tune("tiny_mlp", out, "--p99-ms", "0.000001", "--max-candidates", "2", "--search", "threads")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("No candidate met p99 <= 0.00 ms", p.stdout)
        self.assertFalse(os.path.exists(os.path.join(out, "config.pbtxt")))
        rep = self.report(out)
        self.assertEqual(rep["chosen"], -1)
        self.assertTrue(all(not c["feasible"] and len(c["points"]) == 1 for c in rep["candidates"]))

    def test_what_cannot_be_tuned_is_refused_clearly(self):
        out = workdir("refused")
        for model, extra, code, says in (
                ("pipe_chain", [], 2, "is an ensemble"),
                ("tiny_chat", [], 2, "is a generative model"),
                ("no_such_model", [], 2, "no_such_model"),
                ("tiny_mlp", ["--search", "speed"], 2, "--search: 'speed' is not"),
                ("tiny_mlp", ["--protocols", "smtp"], 2, "--protocols: 'smtp'"),
                ("tiny_mlp", ["--batch-size", "64"], 2, "above the model's max_batch_size 32"),
                ("broken", [], 2, "max_batch_sise"),
                ("onnx_corrupt", [], 1, "did not serve")):
            p = self.tune(model, out, "--p99-ms", "100", "--max-candidates", "1", "--force", *extra, timeout=120)
            self.assertEqual(p.returncode, code, (model, extra, p.stderr))
            self.assertIn(says, p.stderr + p.stdout, (model, extra))
        p = self.tune("tiny_mlp", out, "--p99-ms", "0")
        self.assertEqual(p.returncode, 2, p.stderr)


if __name__ == "__main__":
    unittest.main()
