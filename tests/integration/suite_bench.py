"""Integration suite: bench (run by run_tests.py)."""
import json
import os
import socket
import subprocess
import sys
import unittest


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

# The fixture models the shared server (C.SERVER) serves.
setUpModule = C.serving("tiny_mlp")


class Bench(unittest.TestCase):
    """`inferd bench` against the live server: a 2-second run and its report."""

    def run_bench(self, *extra, duration="2"):
        out = os.path.join(C.ARGS.workdir, "bench_report.json")
        cmd = [C.ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", "http://127.0.0.1:%d" % C.SERVER.port,
               "--warmup-s", "0.5", "--window-s", "1", "--duration-s", duration, "--output", out, *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("p99 us", proc.stdout)
        with open(out) as f:
            return json.load(f)

    def test_closed_loop_report(self):
        rep = self.run_bench("--concurrency", "1,4", "--protocol", "v2-binary")
        self.assertGreater(rep["machine"]["cores"], 0)
        self.assertTrue(rep["machine"]["cpu_model"])
        self.assertEqual([r["load"] for r in rep["rows"]], [1, 4])
        for r in rep["rows"]:
            self.assertEqual(r["mode"], "concurrency")
            self.assertEqual(r["errors"], 0)
            self.assertGreater(r["requests"], 0)
            self.assertAlmostEqual(r["requests_per_s"], r["requests"] / r["duration_s"], places=3)
            self.assertLessEqual(r["p50_us"], r["p90_us"])
            self.assertLessEqual(r["p90_us"], r["p95_us"])
            self.assertLessEqual(r["p95_us"], r["p99_us"])
            self.assertLessEqual(r["p99_us"], r["max_us"])
            self.assertEqual(r["windows"], 2)
            # The server-side breakdown comes from the statistics endpoint.
            self.assertIsNotNone(r["server"])
            self.assertGreater(r["server"]["compute_infer_us"], 0)
            self.assertGreaterEqual(r["server"]["avg_batch_rows"], 1)

    def test_open_loop_and_csv(self):
        rep = self.run_bench("--request-rate", "200", "--protocol", "v1")
        r = rep["rows"][0]
        self.assertEqual(r["mode"], "rate")
        self.assertEqual(r["errors"], 0)
        # Poisson arrivals at 200/s for 2 s: about 400 requests (the seeded schedule
        # has 5 sigma ~ 100; the lower bound also allows a slow sanitizer build).
        self.assertGreater(r["requests"], 250)
        self.assertLess(r["requests"], 500)
        out = os.path.join(C.ARGS.workdir, "bench_report.csv")
        proc = subprocess.run([C.ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", "http://127.0.0.1:%d" % C.SERVER.port,
                               "--warmup-s", "0.2", "--window-s", "0.5", "--duration-s", "0.5", "--output", out],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            header, row = f.read().splitlines()[:2]
        self.assertTrue(header.startswith("label,mode,load,protocol,batch_size,requests_per_s"))
        self.assertEqual(len(header.split(",")), len(row.split(",")))

    def test_host_stall_probe(self):
        rep = self.run_bench("--request-rate", "200", "--protocol", "v2-binary", "--host-stall-probe",
                             "--host-stall-guard-ms", "50")
        r = rep["rows"][0]
        h = r["host_stalls"]
        self.assertEqual(h["guard_s"], 0.05)
        self.assertGreaterEqual(h["count"], 0)
        self.assertLessEqual(h["stalled_s"], r["duration_s"])
        # The requests sent outside stalls are a subset of all, and with no stall they are all of them.
        self.assertLessEqual(h["outside"]["requests"], r["requests"])
        if not h["stalls"]:
            self.assertEqual(h["outside"]["requests"], r["requests"])
            self.assertEqual(h["outside"]["p99_us"], r["p99_us"])
        for start, end in h["stalls"]:
            self.assertLessEqual(start, end)
        # Without the flag the report says null.
        self.assertIsNone(self.run_bench("--request-rate", "200", duration="0.5")["rows"][0]["host_stalls"])

    def test_in_process_baseline(self):
        out = os.path.join(C.ARGS.workdir, "bench_inproc.json")
        proc = subprocess.run([C.ARGS.inferd, "bench", "--in-process", "--model-repository", C.SERVED, "-m", "tiny_mlp",
                               "--batch-sizes", "1,4", "--warmup-s", "0.2", "--window-s", "0.5", "--output", out],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            rows = json.load(f)["rows"]
        self.assertEqual([r["batch_size"] for r in rows], [1, 4])
        for r in rows:
            self.assertEqual(r["mode"], "in-process")
            self.assertGreater(r["requests"], 0)

    def test_grpc_protocol(self):
        # The async closed loop: 5 requests in flight over 2 HTTP/2 connections (3 and 2 streams), one thread.
        before = C.metric(C.SERVER.metrics(), 'nv_inference_request_success{model="tiny_mlp",version="1"}')
        rep = self.run_bench("--protocol", "grpc", "--grpc-url", "127.0.0.1:%d" % C.SERVER.grpc_port,
                             "--concurrency", "5", "--grpc-channels", "2")
        after = C.metric(C.SERVER.metrics(), 'nv_inference_request_success{model="tiny_mlp",version="1"}')
        r = rep["rows"][0]
        self.assertEqual(r["protocol"], "grpc")
        self.assertEqual(r["errors"], 0)
        self.assertGreater(r["requests"], 0)
        self.assertGreater(r["server"]["compute_infer_us"], 0)  # the requests reached the model
        # Every request the report counts (those of its windows) was a success on the server.
        self.assertGreaterEqual(after - before, r["requests"])

    def test_grpc_failures_are_reported_with_their_cause(self):
        # The closed loop speaks HTTP/2 through libnghttp2: a port that refuses, and one that speaks HTTP/1.1
        # (the HTTP port), fail every call with what happened, and the bench says so instead of measuring.
        free = socket.socket()
        free.bind(("127.0.0.1", 0))
        closed_port = free.getsockname()[1]
        free.close()
        for port, cause in ((closed_port, "cannot connect to 127.0.0.1:%d" % closed_port),
                            (C.SERVER.port, "the server closed the connection")):
            cmd = [C.ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", "http://127.0.0.1:%d" % C.SERVER.port,
                   "--protocol", "grpc", "--grpc-url", "127.0.0.1:%d" % port, "--concurrency", "3",
                   "--warmup-s", "0.1", "--window-s", "0.3", "--duration-s", "0.3"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("no request succeeded: " + cause, proc.stderr)

    def test_duration_is_exact_and_formats_and_failures_are_reported(self):
        # --duration-s 1.5 with --window-s 1: two windows of 0.75 s, measuring exactly 1.5 s.
        rep = self.run_bench("--concurrency", "2", duration="1.5")
        r = rep["rows"][0]
        self.assertEqual(r["windows"], 2)
        self.assertAlmostEqual(r["duration_s"], 1.5, places=6)
        self.assertIn(r["stable"], (True, False))
        # The format follows --output-format when the file name does not say; a name that says nothing fails
        # before measuring.
        base = [C.ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", "http://127.0.0.1:%d" % C.SERVER.port,
                "--warmup-s", "0.1", "--window-s", "0.3", "--duration-s", "0.3"]
        out = os.path.join(C.ARGS.workdir, "bench_report.txt")
        proc = subprocess.run(base + ["--output", out], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("name it .json or .csv, or give --output-format", proc.stderr)
        proc = subprocess.run(base + ["--output", out, "--output-format", "csv"], capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            self.assertTrue(f.readline().startswith("label,mode,load"))
        # Every request failing (a wrong version) is a failed run, with the server's reason.
        proc = subprocess.run([C.ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", "http://127.0.0.1:%d" % C.SERVER.port,
                               "--metadata-url", "http://127.0.0.1:%d" % C.SERVER.port, "--protocol", "v2-json",
                               "--warmup-s", "0.1", "--window-s", "0.3", "--duration-s", "0.3",
                               "--input-data", self.bad_input_file()], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("no request succeeded", proc.stderr)
        self.assertIn("HTTP 400", proc.stderr)

    def bad_input_file(self):
        # The right input name with the wrong element count: every request is refused with 400.
        path = os.path.join(C.ARGS.workdir, "bench_bad_input.json")
        with open(path, "w") as f:
            json.dump({"data": [{"input": {"content": [1.0, 2.0, 3.0], "shape": [3]}}]}, f)
        return path

    def test_unknown_model_fails_cleanly(self):
        proc = subprocess.run([C.ARGS.inferd, "bench", "-m", "nope", "--url", "http://127.0.0.1:%d" % C.SERVER.port],
                              capture_output=True, text=True, timeout=30)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("404", proc.stderr)
