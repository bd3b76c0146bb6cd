"""Integration suite: shutdown (run by run_tests.py)."""
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401


class Shutdown(unittest.TestCase):
    def wait_until_pending(self, server, sending=lambda: True):
        """Waits (bounded) until the server holds the request to `slow` (its own pending gauge); `sending` must
        stay true meanwhile (the client is still waiting for its answer)."""
        deadline = time.monotonic() + 120
        while 'nv_inference_pending_request_count{model="slow",version="1"} 1' not in server.metrics():
            self.assertTrue(sending(), "the request was answered before it showed as pending")
            self.assertLess(time.monotonic(), deadline, "the request never showed as pending")

    def test_the_start_line_names_openblas_kernels_that_fit_the_cpu(self):
        # OpenBLAS 0.3.21 took the CI's AVX-512 Xeon for a "Prescott" (SSE3 kernels, 3x slower GEMMs); inferd
        # restarts it on the kernels the CPU's features call for, unless OPENBLAS_CORETYPE says otherwise.
        with open("/proc/cpuinfo") as f:
            flags = set(next(line for line in f if line.startswith("flags")).split(":", 1)[1].split())
        avx512 = {"avx512f", "avx512vl", "avx512bw", "avx512dq"} <= flags
        fits = {"skylakex", "cooperlake", "sapphirerapids", "zen"} if avx512 else {"haswell", "zen", "skylakex"}
        for env, want in ((None, fits if {"avx2", "fma"} <= flags else None), ("Nehalem", {"nehalem"})):
            proc = subprocess.Popen([C.ARGS.inferd, "serve", "--model-repository", C.REPO, "--http-port", "0",
                                     "--grpc-port", "0", "--metrics-port", "0", "--control-state-dir",
                                     ic.state_dir(C.REPO)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True, env=dict(os.environ, **({"OPENBLAS_CORETYPE": env} if env else {})))
            try:
                first = proc.stderr.readline()
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=120)
            self.assertIn("OpenBLAS kernels ", first)
            core = first.rsplit("OpenBLAS kernels ", 1)[1].strip().lower()
            if want is not None:
                self.assertIn(core, want, first)

    def test_a_signal_during_start_up_stops_the_server_cleanly(self):
        # A SIGTERM that arrives while models load (before the main thread waits for signals) must still be a
        # clean stop. OpenBLAS starts threads before main with the signals unblocked; a signal delivered to one
        # of them used to kill the process (exit -15).
        for _ in range(3):
            proc = subprocess.Popen([C.ARGS.inferd, "serve", "--model-repository", C.REPO, "--http-port", "0",
                                     "--grpc-port", "0", "--metrics-port", "0", "--control-state-dir",
                                     ic.state_dir(C.REPO)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True)
            first = proc.stderr.readline()  # logged after the signal handling is set up, before the models load
            self.assertIn("inferd 0.1.0", first)
            proc.send_signal(signal.SIGTERM)
            try:
                _, rest = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                threads = ic.thread_backtraces(proc.pid)
                proc.kill()
                proc.communicate()
                self.fail("inferd did not stop within 120 s of a SIGTERM during start-up:\n" + threads)
            self.assertEqual(proc.returncode, 0, first + rest)
            self.assertIn("received Terminated, shutting down", rest)

    def test_sigterm_finishes_in_flight_requests(self):
        server = ic.Server(C.ARGS.inferd, C.served_repository("shutdown", ["mlp", "slow"]))
        try:
            result = {}
            x = {"x": np.ones((1, 256), np.float32)}

            def send():
                result["r"] = server.post_json("/v2/models/slow/infer", ic.v2_json_request(x))

            t = threading.Thread(target=send)
            t.start()
            self.wait_until_pending(server, t.is_alive)
            server.proc.send_signal(signal.SIGTERM)
            t.join(60)
            self.assertEqual(result["r"][0], 200, result)
            self.assertEqual(server.proc.wait(60), 0)
        finally:
            server.stop()

    def test_sigterm_ends_grpc_streams_after_their_answers(self):
        pb = C.stubs().pb
        server = ic.Server(C.ARGS.inferd, C.served_repository("shutdown", ["mlp", "slow"]))
        try:
            ch = grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port)
            stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
            x = np.ones((1, 256), np.float32)
            sent = threading.Event()

            def requests():
                yield gc.infer_request(pb, "slow", {"x": x}, id="slow-1")
                sent.wait(60)  # the client keeps its side of the stream open

            # A stream with nothing in flight at the signal. It is opened with one quick request whose answer
            # shows the server has taken the stream: a call still on its way when the server stops is refused
            # (UNAVAILABLE), which is not what this checks.
            def idle_requests():
                yield gc.infer_request(pb, "mlp", {"x": np.ones((1, 8), np.float32)}, id="warm")
                sent.wait(60)

            idle = stub.ModelStreamInfer(idle_requests(), timeout=120)
            self.assertEqual(next(idle).infer_response.id, "warm")
            stream = stub.ModelStreamInfer(requests(), timeout=120)
            self.wait_until_pending(server)
            server.proc.send_signal(signal.SIGTERM)
            answers = list(stream)  # ends OK once its accepted request is answered
            self.assertEqual([a.infer_response.id for a in answers], ["slow-1"])
            self.assertEqual(answers[0].error_message, "")
            self.assertEqual(list(idle), [])
            self.assertEqual(server.proc.wait(60), 0)
            sent.set()
            ch.close()
        finally:
            server.stop()
