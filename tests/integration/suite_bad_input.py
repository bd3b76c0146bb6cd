"""Integration suite: bad_input (run by run_tests.py)."""
import concurrent.futures
import gzip
import json
import os
import socket
import sys
import threading
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import tearDownModule  # noqa: E402,F401

# The fixture models the shared server (C.SERVER) serves.
setUpModule = C.serving("held", "held_ctl", "slow", "tiny_mlp")


class BadInput(unittest.TestCase):
    def assert_error(self, status, path, body, headers=None, want=400, text=None):
        st, hdrs, data = C.SERVER.request("POST", path, body, headers or {})
        self.assertEqual(st, want, data[:300])
        if data:
            err = json.loads(data)["error"]
            self.assertTrue(err)
            if text:
                self.assertIn(text, err)
        # The server still answers correctly afterwards.
        x = np.arange(16, dtype=np.float32).reshape(1, 16)
        st, js = C.SERVER.post_json("/v2/models/tiny_mlp/infer", ic.v2_json_request({"input": x}))
        self.assertEqual(st, 200)
        np.testing.assert_allclose(np.array(js["outputs"][0]["data"]).reshape(1, 4), C.torch_ref("tiny_mlp", x), atol=C.TOL)

    def test_a_request_whose_client_hung_up_never_runs(self):
        before = C.held_counts()
        gone_before = C.client_cancellations()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            try:
                busy = pool.submit(C.SERVER.post_json, "/v2/models/held/infer",
                                   ic.v2_json_request({"x": np.array([[7]], np.float32)}))
                C.wait_held_at_gate(self, 1, busy)
                body = json.dumps(ic.v2_json_request({"x": np.array([[0]], np.float32)})).encode()
                c = socket.create_connection(("127.0.0.1", C.SERVER.port), timeout=60)
                c.sendall(b"POST /v2/models/held/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body)
                C.wait_held_pending(self, 2, busy)
                c.close()  # the client gives up while its request waits behind the busy one
                C.wait_until(self, "the server to see the hang-up",
                             lambda: C.client_cancellations() == gone_before + 1, busy)
                C.gate(1)
                st, js = busy.result(timeout=60)
                self.assertEqual(st, 200, js)
                self.assertEqual(js["outputs"][0]["data"], [7])
                C.wait_held_pending(self, 0)
            finally:
                C.gate(0)
        after = C.held_counts()
        self.assertEqual(after["exec"] - before["exec"], 1)  # only the busy request ran
        self.assertEqual(after["cancelled"] - before["cancelled"], 1)

    def test_deeply_nested_json_is_rejected_not_a_stack_overflow(self):
        # 2 million '[' fit the 8 MiB body limit; a recursive JSON parser runs out of stack on them. The parse stops
        # at --json-max-depth (64 by default).
        deep = b'{"instances": ' + b"[" * 2_000_000 + b"}"
        self.assert_error(None, "/v1/models/tiny_mlp:predict", deep, want=400, text="nests deeper than 64 levels")
        deep = b'{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1], "data": ' + b"[" * 2_000_000 + b"}"
        self.assert_error(None, "/v2/models/tiny_mlp/infer", deep, want=400, text="nests deeper than 64 levels")
        self.assert_error(None, "/v2/repository/index", b'{"ready": ' + b"[" * 2_000_000, want=400)

    def test_bad_requests_get_clear_4xx(self):
        good = ic.v2_json_request({"input": np.ones((1, 16), np.float32)})
        p = "/v2/models/tiny_mlp/infer"

        def mutate(fn):
            b = json.loads(json.dumps(good))
            fn(b)
            return json.dumps(b).encode()

        cases = [
            (p, b"{not json", None, 400, "malformed JSON"),
            (p, mutate(lambda b: b["inputs"][0].update(datatype="INT32", data=[1] * 16)), None, 400, "data-type"),
            (p, mutate(lambda b: b["inputs"][0].update(shape=[1, 15], data=[1.0] * 15)), None, 400, "unexpected shape"),
            (p, mutate(lambda b: b["inputs"][0].update(name="nope")), None, 400, "nope"),
            (p, mutate(lambda b: b.update(inputs=[])), None, 400, "missing input"),
            (p, mutate(lambda b: b["inputs"][0].update(data=[1.0] * 3)), None, 400, "elements"),
            (p, mutate(lambda b: b["inputs"][0].update(datatype="FLOAT")), None, 400, "datatype"),
            ("/v2/models/nope/infer", json.dumps(good).encode(), None, 404, "unknown model"),
            ("/v2/models/tiny_mlp/versions/9/infer", json.dumps(good).encode(), None, 404, "version 9"),
            (p, b"\x1f\x8b\x08garbage", {"Content-Encoding": "gzip"}, 400, "gzip"),
            (p, json.dumps(good).encode(), {"Content-Encoding": "br"}, 415, "Content-Encoding"),
            ("/v2/models/tiny_mlp/frobnicate", b"{}", None, 404, "no route"),
            ("/v1/models/tiny_mlp:predict", b'{"instances": [[1,2]], "inputs": [[1]]}', None, 400, "exactly one"),
            ("/v1/models/tiny_mlp:predict", b'{"instances": [[1,2]]}', None, 400, "unexpected shape"),
        ]
        for path, body, headers, want, text in cases:
            with self.subTest(path=path, text=text):
                self.assert_error(None, path, body, headers, want, text)

    def test_binary_payload_errors(self):
        body, hlen = ic.v2_binary_request({"input": np.ones((1, 16), np.float32)})
        p = "/v2/models/tiny_mlp/infer"
        self.assert_error(None, p, body[:-5], {"Inference-Header-Content-Length": str(hlen)}, 400, "byte size")
        self.assert_error(None, p, body, {"Inference-Header-Content-Length": str(hlen - 3)}, 400, "JSON")
        self.assert_error(None, p, body, {"Inference-Header-Content-Length": str(len(body) + 10)}, 400, "exceeds")
        self.assert_error(None, p, body, {"Inference-Header-Content-Length": "abc"}, 400, "Inference-Header-Content-Length")

    def test_oversized_body_is_413(self):
        # Announce a body over the limit: the server answers 413 without reading it.
        s = socket.create_connection(("127.0.0.1", C.SERVER.port), timeout=30)
        s.sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (9 << 20))
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        s.close()
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply[:200])
        # Chunked bodies have no length up front: the limit stops them while reading.
        s = socket.create_connection(("127.0.0.1", C.SERVER.port), timeout=30)
        s.sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        reply = b""
        try:
            for _ in range(20):
                s.sendall(b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            reply = s.recv(4096)
        except ConnectionResetError:
            pass
        s.close()
        self.assertTrue(reply == b"" or reply.startswith(b"HTTP/1.1 413"), reply[:200])
        bomb = gzip.compress(b" " * (20 << 20))
        self.assert_error(None, "/v2/models/tiny_mlp/infer", bomb, {"Content-Encoding": "gzip"}, 413, "limit")

    def test_stalled_client_is_disconnected(self):
        s = socket.create_connection(("127.0.0.1", C.SERVER.port), timeout=30)
        s.sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inp")
        # The server closes the connection once --http-read-timeout-ms passes:
        # recv returns b"" (or the peer resets); a 30 s socket timeout bounds the wait.
        try:
            data = s.recv(1024)
        except ConnectionResetError:
            data = b""
        s.close()
        self.assertEqual(data, b"")
        self.assert_error(None, "/v2/models/nope/infer", b"{}", None, 404)

    def test_full_queue_answers_503(self):
        x = {"x": np.ones((1, 256), np.float32)}
        results, lock = [], threading.Lock()

        def send():
            st, js = C.SERVER.post_json("/v2/models/slow/infer", ic.v2_json_request(x))
            with lock:
                results.append((st, js))

        threads = [threading.Thread(target=send) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(st for st, _ in results)
        self.assertIn(200, codes)
        self.assertIn(503, codes, results)
        self.assertTrue(set(codes) <= {200, 503}, codes)
        for st, js in results:
            if st == 503:
                self.assertIn("queue is full", js["error"])
