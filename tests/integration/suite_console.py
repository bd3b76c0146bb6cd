"""The web console (docs/console.md) in a real browser: Debian's headless Chromium driven by playwright-core
(console/console_test.mjs, one browser per test). Every page loads with no console error; the try-it form answers
the digits model as PyTorch does; the chat playground streams; a rollback through the console changes what /infer
serves (only with the admin token); with --auth-all-routes the console asks for the token and keeps it out of sight.
Screenshots are kept in WORKDIR/console_screenshots. Stages: ASan and release (NUMERIC_SUITES: the browser drives
code the other suites run under TSan)."""
import json
import os
import shutil
import struct
import subprocess
import sys
import unittest
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
import make_fixtures  # noqa: E402
from suite_batch import mlp_inputs, write_csv  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "console", "console_test.mjs")
MODELS = ("digits", "tiny_chat", "mlp", "resnet18")
SERVER = None
TOKEN = "console-test-token-8f3a"
LC_CONFIG = """platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def setUpModule():
    global SERVER
    for need in (shutil.which("node"), os.path.join(HERE, "console", "node_modules", "playwright-core"),
                 os.environ.get("CHROMIUM", "/usr/bin/chromium")):
        if not need or not os.path.exists(need):
            raise RuntimeError("the console tests need node, playwright-core and chromium: run scripts/setup.sh --test")
    C.fixture_repository()
    repo = C.served_repository("suite_console", MODELS)
    # Tracing on (every request; the collector is a closed port: its spans are dropped) so the traces page has rows.
    SERVER = ic.Server(C.ARGS.inferd, repo, "--trace-config", "mode=opentelemetry", "--trace-config", "rate=1",
                       "--trace-config", "opentelemetry,url=http://127.0.0.1:9/v1/traces")


def tearDownModule():
    if SERVER:
        rc = SERVER.stop()
        assert rc == 0, "".join(SERVER.log[-30:])


def browse(test, server, scenario, **args):
    """Runs one scenario of the browser driver against `server`; what it saw (a failed step fails the test)."""
    out = os.path.join(C.ARGS.workdir, "console_screenshots", test.id().split(".")[-1])
    os.makedirs(out, exist_ok=True)
    p = subprocess.run(["node", DRIVER, scenario, "http://127.0.0.1:%d" % server.port, out, json.dumps(args)],
                       capture_output=True, text=True, timeout=240)
    test.assertEqual(p.returncode, 0, p.stderr[-3000:])
    result = json.loads(p.stdout.strip().splitlines()[-1])
    test.assertNotIn("failure", result, result.get("failure"))
    for shot in result["screenshots"]:
        test.assertGreater(os.path.getsize(shot), 1000, shot)
    return result


def digit_sample():
    from sklearn.datasets import load_digits
    d = load_digits()
    return (d.data[:1] / 16.0).astype(np.float32), int(d.target[0])


def write_png(path, rgb):
    """An 8-bit RGB PNG of the array `rgb` (H, W, 3), no colour profile (the browser decodes it as it is)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


class Console(unittest.TestCase):
    def test_every_page_loads_without_console_errors(self):
        x, _ = digit_sample()
        for _ in range(3):  # traffic for the charts and traced requests for the traces page
            st, js = SERVER.post_json("/v2/models/digits/infer", ic.v2_json_request({"pixels": x}))
            self.assertEqual(st, 200, js)
        pages = [["models", "#/models", "#models-table"], ["digits", "#/model/digits", "#tryit-submit"],
                 ["chat", "#/model/tiny_chat", "#chat-send"], ["live", "#/live", ".charts"],
                 ["jobs", "#/jobs", "#jobs-empty"], ["cluster", "#/cluster", "#cluster-single"],
                 ["traces", "#/traces", "#traces-table"]]
        r = browse(self, SERVER, "pages", pages=pages)
        self.assertEqual(r["errors"], [])
        self.assertEqual(len(r["screenshots"]), len(pages))
        for m in MODELS:
            self.assertIn(m, r["pages"]["models"])
        self.assertIn("READY", r["pages"]["models"])
        self.assertIn("pixels FP32 [-1,64]", r["pages"]["digits"])
        self.assertIn("Requests", r["pages"]["live"])
        self.assertIn("digits", r["pages"]["live"])
        self.assertIn("InferRequest /v2/models/digits/infer", r["pages"]["traces"])
        self.assertIn("runs alone", r["pages"]["cluster"])

    def test_try_it_answers_the_digits_model_as_pytorch_does(self):
        x, label = digit_sample()
        want = C.torch_ref("digits", x)
        r = browse(self, SERVER, "tryit", model="digits", input="pixels", output="probabilities",
                   values=[float(v) for v in x[0]])
        self.assertEqual(r["errors"], [])
        np.testing.assert_allclose(np.array(r["values"], np.float32).reshape(want.shape), want, rtol=1e-5, atol=1e-6)
        self.assertEqual(int(r["top1"]), int(np.argmax(want)))
        self.assertEqual(int(r["top1"]), label)
        self.assertEqual(r["version"], "1")
        self.assertRegex(r["latency"], r"answered by version 1 in [0-9.]+ m?s")

    def test_an_uploaded_image_reaches_an_image_model_as_its_pixels(self):
        rgb = np.random.default_rng(7).integers(0, 256, size=(224, 224, 3))
        path = os.path.join(C.ARGS.workdir, "console_image_%d.png" % os.getpid())
        write_png(path, rgb)
        x = (rgb.transpose(2, 0, 1)[None] / 255.0).astype(np.float32)  # [1, 3, 224, 224], CHW, 0..1
        want = C.torch_ref("resnet18", x)
        r = browse(self, SERVER, "image", model="resnet18", input="image", output="logits", file=path)
        self.assertEqual(r["errors"], [])
        np.testing.assert_allclose(np.array(r["values"], np.float32).reshape(want.shape), want, rtol=1e-4, atol=1e-4)
        self.assertEqual(int(r["top1"]), int(np.argmax(want)))

    def test_the_chat_playground_streams_the_greedy_answer(self):
        message, max_tokens = "hello there", 12
        r = browse(self, SERVER, "chat", model="tiny_chat", message=message, max_tokens=max_tokens)
        self.assertEqual(r["errors"], [])
        st, js = SERVER.post_json("/v1/chat/completions", {"model": "tiny_chat", "temperature": 0,
                                                          "max_tokens": max_tokens,
                                                          "messages": [{"role": "user", "content": message}]})
        self.assertEqual(st, 200, js)
        self.assertEqual(r["text"], js["choices"][0]["message"]["content"])
        # Streamed: the answer came as several events, shown as they arrived.
        self.assertGreater(r["chunks"], 1)
        self.assertGreater(r["updates"], 1)
        self.assertIn("first token after", r["stats"])


class ConsoleActions(unittest.TestCase):
    """Servers of their own: management with an admin token, and --auth-all-routes."""

    def setUp(self):
        self.repo = os.path.join(C.ARGS.workdir, "console_repo_%d" % os.getpid())
        ic.remove_repository(self.repo)
        os.makedirs(os.path.join(self.repo, "lc"))
        with open(os.path.join(self.repo, "lc", "config.pbtxt"), "w") as f:
            f.write(LC_CONFIG)
        self.token_file = os.path.join(C.ARGS.workdir, "console_token_%d" % os.getpid())
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        self.x = np.arange(8, dtype=np.float32).reshape(2, 4)

    def publish(self, k):
        os.makedirs(os.path.join(self.repo, "lc", str(k)), exist_ok=True)
        torch.jit.script(make_fixtures.Scale(float(k))).save(os.path.join(self.repo, "lc", str(k), "model.pt"))

    def served(self, server):
        st, js = server.post_json("/v2/models/lc/infer", ic.v2_json_request({"x": self.x}))
        self.assertEqual(st, 200, js)
        np.testing.assert_allclose(np.array(js["outputs"][0]["data"], np.float32).reshape(2, 4),
                                   self.x * float(js["model_version"]), atol=C.TOL)
        return js["model_version"]

    def test_a_rollback_through_the_console_changes_what_infer_serves(self):
        self.publish(1)
        server = ic.Server(C.ARGS.inferd, self.repo, "--model-control-mode", "explicit", "--load-model", "lc",
                           "--admin-token-file", self.token_file)
        try:
            auth = {"Authorization": "Bearer " + TOKEN}
            self.publish(2)
            st, _, body = server.request("POST", "/v2/repository/models/lc/load", b"{}", headers=auth)
            self.assertEqual(st, 200, body)
            self.assertEqual(self.served(server), "2")

            # Without the token the console shows why it cannot (the model list is a management route), offers no
            # rollback, and nothing changes.
            r = browse(self, server, "rollback", model="lc")
            self.assertIn("management routes need", r["status"])
            self.assertIn("admin token", r["banner"])
            self.assertFalse(r["has_button"])
            self.assertEqual(self.served(server), "2")
            self.assertTrue(r["errors"])
            for e in r["errors"]:
                self.assertIn("401", e)

            r = browse(self, server, "rollback", model="lc", token=TOKEN)
            self.assertIn("roll back: done", r["status"])
            self.assertIn('"rolled_back_to":"1"', r["status"])
            self.assertEqual(self.served(server), "1")
            self.assertEqual(r["errors"], [])
            for e in r["errors_before_token"]:
                self.assertIn("401", e)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_under_on_demand_residency_a_model_page_loads_the_model_only_when_asked(self):
        self.publish(1)
        server = ic.Server(C.ARGS.inferd, self.repo, "--model-residency", "on-demand")
        try:
            def resident():
                st, listing = server.get_json("/v2/repository/models")
                self.assertEqual(st, 200, listing)
                return listing["models"][0]["idle_ms"] >= 0
            self.assertFalse(resident())
            r = browse(self, server, "ondemand", model="lc")
            self.assertIn("loads on its first request", r["before"])
            self.assertIn("READY", r["after"])
            self.assertEqual(r["errors"], [])
            self.assertTrue(resident())
        finally:
            self.assertEqual(server.stop(), 0)

    def test_the_jobs_page_shows_a_finished_job_with_its_progress(self):
        data = os.path.abspath(os.path.join(C.ARGS.workdir, "console_jobs_%d" % os.getpid()))
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data)
        keys, x = mlp_inputs(300, 5)
        write_csv(os.path.join(data, "in.csv"), keys, x)
        config = os.path.join(data, "jobs.json")
        with open(config, "w") as f:
            json.dump({"allowed_dirs": [data], "connections": {"wh": {"type": "sqlite",
                                                                     "path": os.path.join(data, "wh.db")}}}, f)
        server = ic.Server(C.ARGS.inferd, C.served_repository("suite_console_jobs", ["mlp"]), "--jobs-config", config)
        try:
            st, job = server.post_json("/v2/jobs", {
                "model": "mlp", "source": {"type": "csv", "path": os.path.join(data, "in.csv")},
                "sink": {"type": "sqlite", "connection": "wh", "table": "preds"}, "key": "id",
                "inputs": {"x": ["f%d" % i for i in range(8)]}})
            self.assertEqual(st, 201, job)
            C.wait_until(self, "the job to finish",
                         lambda: server.get_json("/v2/jobs/" + job["id"])[1]["state"] == "succeeded")
            r = browse(self, server, "pages", pages=[["jobs", "#/jobs", "#jobs-table"]])
            self.assertEqual(r["errors"], [])
            for text in (job["id"], "mlp", "succeeded", "100.0%", "300 (300 written)"):
                self.assertIn(text, r["pages"]["jobs"])
        finally:
            self.assertEqual(server.stop(), 0)

    def test_with_auth_all_routes_the_console_asks_for_the_token_and_hides_it(self):
        self.publish(1)
        server = ic.Server(C.ARGS.inferd, self.repo, "--admin-token-file", self.token_file, "--auth-all-routes",
                           "true")
        try:
            # The page itself needs no token (it holds no data); its data does.
            st, _, page = server.request("GET", "/console/")
            self.assertEqual(st, 200)
            self.assertEqual(server.request("GET", "/console/api/info")[0], 401)
            r = browse(self, server, "auth", token=TOKEN)
            self.assertIn("needs a token", r["before"])
            self.assertIn("lc", r["after"])
            self.assertIn("READY", r["after"])
            self.assertEqual(r["stored"], ["inferd.token"])
            self.assertFalse(r["visible_token"])
            # Before the token: the info call was refused (401); with it nothing failed.
            self.assertTrue(r["errors_before_token"], "the first call should have been refused")
            for e in r["errors_before_token"]:
                self.assertIn("401", e)
            self.assertEqual(r["errors"], [])
        finally:
            self.assertEqual(server.stop(), 0)
