"""Access control (docs/security.md): scoped tokens from --auth-tokens-file checked route by route over HTTP (KServe
v2, TF Serving, OpenAI) and gRPC (KServe, health, inferd's management service); 401 / UNAUTHENTICATED without a
known token, 403 / PERMISSION_DENIED without the route's scope or model, 429 / RESOURCE_EXHAUSTED over a token's
rate; the file re-read when it changes and on SIGHUP, a broken one refused while the tokens in use stay, and no
request lost to a reload. TLS (class Tls): curl and Python's ssl (tritonclient's way) with and without the CA, gRPC
over TLS, mutual TLS refusing clients without a certificate or with another CA's, Triton's gRPC SSL flags, and
certificates rotated under load (new and kept connections, HTTP and gRPC) losing no request; certificates made here
(tls_fixtures.py). Stages: ASan, TSan and release (tokens and TLS contexts are swapped under concurrent requests)."""
import http.client
import json
import os
import queue
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import unittest

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401
import inferd_client as ic  # noqa: E402
import tls_fixtures  # noqa: E402

TOKENS = {
    "infer": "infer-token-tiny-0123456789",   # infer, models tiny_*
    "reader": "reader-token-0123456789ab",    # read
    "models": "models-token-0123456789ab",    # models
    "jobs": "jobs-token-0123456789abcdef",    # jobs
    "cluster": "cluster-token-0123456789ab",  # cluster
    "ops": "ops-token-everything-012345",     # *
    "slow": "slow-token-one-a-second-0123",   # infer at 1 request/s
}


def tokens_file_text(names=None, extra=()):
    entries = [
        {"name": "infer", "token": TOKENS["infer"], "scopes": ["infer"], "models": ["tiny_*"]},
        {"name": "reader", "token": TOKENS["reader"], "scopes": ["read"]},
        {"name": "models", "token": TOKENS["models"], "scopes": ["models"]},
        {"name": "jobs", "token": TOKENS["jobs"], "scopes": ["jobs"]},
        {"name": "cluster", "token": TOKENS["cluster"], "scopes": ["cluster"]},
        {"name": "ops", "token": TOKENS["ops"], "scopes": ["*"]},
        {"name": "slow", "token": TOKENS["slow"], "scopes": ["infer"], "requests_per_second": 1},
    ]
    entries = [e for e in entries if names is None or e["name"] in names] + list(extra)
    return json.dumps({"tokens": entries})


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def bearer(name):
    return {"Authorization": "Bearer " + TOKENS[name]}


def grpc_md(name):
    return (("authorization", "Bearer " + TOKENS[name]),)


X = np.ones((1, 16), np.float32)
INFER_BODY = json.dumps(ic.v2_json_request({"input": X})).encode()
PREDICT_BODY = json.dumps({"instances": X.tolist()}).encode()
CHAT_BODY = json.dumps({"model": "tiny_chat", "messages": [{"role": "user", "content": "hi"}],
                        "max_tokens": 2}).encode()


class Security(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tokens_path = os.path.join(C.ARGS.workdir, "security_tokens.json")
        write_atomically(cls.tokens_path, tokens_file_text())
        cls.server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                               "--load-model", "mlp", "--load-model", "tiny_chat", "--auth-tokens-file",
                               cls.tokens_path, "--credentials-check-interval-ms", "100")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def setUp(self):
        # Each test starts from the full file (a test may have replaced it).
        with open(self.tokens_path) as f:
            if f.read() != tokens_file_text():
                self.reload(tokens_file_text())

    def reload(self, text):
        """Replaces the tokens file and waits (bounded) until the server has re-read it."""
        before = self.reload_count("ok")
        write_atomically(self.tokens_path, text)
        C.wait_until(self, "the tokens file re-read", lambda: self.reload_count("ok") > before, timeout=30)

    def reload_count(self, result):
        for line in self.server.metrics().splitlines():
            if line.startswith('inferd_auth_token_reloads_total{result="%s"}' % result):
                return float(line.split()[-1])
        return 0.0

    def test_http_routes_need_their_scope_and_model(self):
        s = self.server
        # (method, path, body, the token names allowed)
        routes = [
            ("GET", "/v2", None, {"reader", "ops"}),
            ("GET", "/v2/models/tiny_mlp", None, {"reader", "ops"}),
            ("GET", "/v2/models/tiny_mlp/config", None, {"reader", "ops"}),
            ("GET", "/v2/models/tiny_mlp/ready", None, {"reader", "ops"}),
            ("GET", "/v2/models/stats", None, {"reader", "ops"}),
            ("GET", "/v1/models/tiny_mlp", None, {"reader", "ops"}),
            ("GET", "/v1/models", None, {"reader", "ops"}),
            ("POST", "/v2/models/tiny_mlp/infer", INFER_BODY, {"infer", "ops", "slow"}),
            ("POST", "/v1/models/tiny_mlp:predict", PREDICT_BODY, {"infer", "ops", "slow"}),
            ("POST", "/v2/models/mlp/infer", INFER_BODY, {"ops", "slow"}),  # "infer" holds tiny_* only
            ("POST", "/v1/chat/completions", CHAT_BODY, {"infer", "ops", "slow"}),
            ("POST", "/v2/repository/index", b"{}", {"models", "ops"}),
            ("GET", "/v2/repository/models/tiny_mlp/labels", None, {"models", "ops"}),
            ("GET", "/v2/repository/models/tiny_mlp/traffic", None, {"models", "ops"}),
            ("GET", "/v2/jobs", None, {"jobs", "ops"}),
            ("GET", "/v2/cluster", None, {"cluster", "ops"}),
            ("GET", "/console/api/traces", None, {"models", "ops"}),
            ("GET", "/console/api/live", None, {"reader", "ops"}),
        ]
        for method, path, body, allowed in routes:
            st, hdrs, data = s.request(method, path, body)
            self.assertEqual(st, 401, "%s %s without a token: %s" % (method, path, data))
            self.assertEqual(hdrs.get("www-authenticate"), "Bearer")
            st, _, data = s.request(method, path, body, {"Authorization": "Bearer not-a-token-of-this-server"})
            self.assertEqual(st, 401, data)
            error = json.loads(data)["error"]
            if path.startswith(("/v1/chat", "/v1/completions")) or path == "/v1/models":  # OpenAI's shape
                self.assertEqual(error["type"], "authentication_error")
                error = error["message"]
            self.assertEqual(error, "invalid bearer token")
            for name in TOKENS:
                if name == "slow" and name in allowed:
                    continue  # its rate is tested on its own
                st, _, data = s.request(method, path, body, bearer(name))
                if name in allowed:
                    self.assertNotIn(st, (401, 403, 429), "%s %s with %s: %s" % (method, path, name, data))
                else:
                    self.assertEqual(st, 403, "%s %s with %s: %s" % (method, path, name, data))
                    for secret in TOKENS.values():
                        self.assertNotIn(secret.encode(), data)
        # Health needs nothing (probes carry no token); the answer of a model's inference is the model's.
        self.assertEqual(s.request("GET", "/v2/health/ready")[0], 200)
        self.assertEqual(s.request("GET", "/v2/health/live")[0], 200)
        st, _, data = s.request("POST", "/v2/models/tiny_mlp/infer", INFER_BODY, bearer("infer"))
        self.assertEqual(st, 200, data)
        self.assertEqual(json.loads(data)["model_name"], "tiny_mlp")
        # OpenAI's refusals are in OpenAI's shape: a model named in the body outside the token's models.
        st, _, data = s.request("POST", "/v1/completions",
                                json.dumps({"model": "mlp", "prompt": "x", "max_tokens": 1}).encode(), bearer("infer"))
        self.assertEqual(st, 403, data)
        self.assertEqual(json.loads(data)["error"]["type"], "permission_error")
        metrics = s.metrics()
        self.assertRegex(metrics, r'inferd_auth_refusals_total\{reason="unauthenticated"\} [1-9]')
        self.assertRegex(metrics, r'inferd_auth_refusals_total\{reason="permission_denied"\} [1-9]')

    def test_grpc_calls_need_their_scope_and_model(self):
        pb = C.stubs().pb
        with grpc.insecure_channel("127.0.0.1:%d" % self.server.grpc_port) as ch:
            stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
            mg = C.stubs().management_grpc.ManagementServiceStub(ch)
            req = pb.ModelInferRequest(model_name="tiny_mlp")
            t = req.inputs.add(name="input", datatype="FP32", shape=[1, 16])
            t.contents.fp32_contents.extend([1.0] * 16)
            other = pb.ModelInferRequest(model_name="mlp")
            other.CopyFrom(req)
            other.model_name = "mlp"
            calls = [
                (lambda md: stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=60, metadata=md), {"reader", "ops"}),
                (lambda md: stub.ModelMetadata(pb.ModelMetadataRequest(name="tiny_mlp"), timeout=60, metadata=md),
                 {"reader", "ops"}),
                (lambda md: stub.ModelConfig(pb.ModelConfigRequest(name="tiny_mlp"), timeout=60, metadata=md),
                 {"reader", "ops"}),
                (lambda md: stub.ModelInfer(req, timeout=60, metadata=md), {"infer", "ops"}),
                (lambda md: stub.ModelInfer(other, timeout=60, metadata=md), {"ops"}),
                (lambda md: stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=60, metadata=md),
                 {"models", "ops"}),
                (lambda md: mg.GetTraffic(C.stubs().management.ModelRequest(model_name="tiny_mlp"), timeout=60,
                                          metadata=md), {"models", "ops"}),
            ]
            for i, (call, allowed) in enumerate(calls):
                for md, want in ((None, grpc.StatusCode.UNAUTHENTICATED),
                                 ((("authorization", "Bearer nope-not-a-token-here"),), grpc.StatusCode.UNAUTHENTICATED)):
                    with self.assertRaises(grpc.RpcError) as cm:
                        call(md)
                    self.assertEqual(cm.exception.code(), want, "call %d" % i)
                for name in TOKENS:
                    if name == "slow":
                        continue
                    if name in allowed:
                        try:
                            call(grpc_md(name))
                        except grpc.RpcError as e:  # the call's own answer (a model's input), not a refusal
                            self.assertNotIn(e.code(), (grpc.StatusCode.UNAUTHENTICATED,
                                                        grpc.StatusCode.PERMISSION_DENIED,
                                                        grpc.StatusCode.RESOURCE_EXHAUSTED), "call %d" % i)
                    else:
                        with self.assertRaises(grpc.RpcError) as cm:
                            call(grpc_md(name))
                        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED,
                                         "call %d with %s" % (i, name))
            # Health (KServe's and grpc.health.v1) needs no token.
            self.assertTrue(stub.ServerLive(pb.ServerLiveRequest(), timeout=60).live)
            # A stream: each request is checked for its model; the stream goes on after a refusal.
            replies = list(stub.ModelStreamInfer(iter([other, req]), timeout=60, metadata=grpc_md("infer")))
            self.assertEqual(len(replies), 2)
            self.assertIn("may not use this model", replies[0].error_message)
            self.assertEqual(replies[1].error_message, "")
            self.assertEqual(replies[1].infer_response.model_name, "tiny_mlp")
            with self.assertRaises(grpc.RpcError) as cm:
                list(stub.ModelStreamInfer(iter([req]), timeout=60, metadata=grpc_md("reader")))
            self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)

    def test_a_token_over_its_rate_gets_429_and_resource_exhausted(self):
        s = self.server
        started = time.monotonic()
        statuses = [s.request("POST", "/v2/models/tiny_mlp/infer", INFER_BODY, bearer("slow")) for _ in range(6)]
        elapsed = time.monotonic() - started
        ok = [st for st, _, _ in statuses if st == 200]
        limited = [(st, h, d) for st, h, d in statuses if st == 429]
        self.assertEqual(len(ok) + len(limited), 6, [st for st, _, _ in statuses])
        # A burst of one, then one a second.
        self.assertLessEqual(len(ok), 1 + int(elapsed) + 1)
        self.assertGreaterEqual(len(limited), 1)
        self.assertEqual(limited[0][1].get("retry-after"), "1")
        self.assertIn("over its request rate", json.loads(limited[0][2])["error"])
        # Other tokens are not held back by it.
        self.assertEqual(s.request("POST", "/v2/models/tiny_mlp/infer", INFER_BODY, bearer("ops"))[0], 200)
        pb = C.stubs().pb
        with grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port) as ch:
            stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
            codes = []
            for _ in range(4):
                try:
                    stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=60, metadata=grpc_md("slow"))
                    codes.append("ok")
                except grpc.RpcError as e:
                    codes.append(e.code())
            # The slow token has no read scope: refused for that first; its rate applies to what it may call.
            self.assertTrue(all(c == grpc.StatusCode.PERMISSION_DENIED for c in codes), codes)
            req = pb.ModelInferRequest(model_name="tiny_mlp")
            t = req.inputs.add(name="input", datatype="FP32", shape=[1, 16])
            t.contents.fp32_contents.extend([1.0] * 16)
            codes = []
            for _ in range(4):
                try:
                    stub.ModelInfer(req, timeout=60, metadata=grpc_md("slow"))
                    codes.append("ok")
                except grpc.RpcError as e:
                    codes.append(e.code())
            self.assertIn(grpc.StatusCode.RESOURCE_EXHAUSTED, codes)
        self.assertRegex(s.metrics(), r'inferd_auth_refusals_total\{reason="rate_limited"\} [1-9]')

    def test_the_tokens_file_is_re_read_without_losing_a_request(self):
        s = self.server
        fresh = {"name": "fresh", "token": "fresh-token-0123456789ab", "scopes": ["infer"]}
        # A client keeps calling with a token that every version of the file holds, while the file changes.
        stop = threading.Event()
        failures, done = [], [0]

        def client():
            conn = s.conn()
            while not stop.is_set():
                st, _, data = s.request("POST", "/v2/models/tiny_mlp/infer", INFER_BODY, bearer("ops"), conn=conn)
                if st != 200:
                    failures.append((st, data))
                done[0] += 1
            conn.close()

        t = threading.Thread(target=client)
        t.start()
        try:
            self.reload(tokens_file_text(extra=[fresh]))
            self.assertEqual(s.request("POST", "/v2/models/tiny_mlp/infer", INFER_BODY,
                                       {"Authorization": "Bearer fresh-token-0123456789ab"})[0], 200)
            self.reload(tokens_file_text(names={"ops", "reader"}))
            self.assertEqual(s.request("POST", "/v2/models/tiny_mlp/infer", INFER_BODY,
                                       {"Authorization": "Bearer fresh-token-0123456789ab"})[0], 401)
            self.assertEqual(s.request("POST", "/v2/models/tiny_mlp/infer", INFER_BODY, bearer("infer"))[0], 401)
            # A broken file (cut off mid-write) is refused and logged; the tokens in use stay.
            failed = self.reload_count("failed")
            write_atomically(self.tokens_path, '{"tokens": [{"name": "x", "token": "short"')
            C.wait_until(self, "the broken file refused", lambda: self.reload_count("failed") > failed, timeout=30)
            self.assertIsNotNone(s.wait_for_log("cannot reload the tokens file"))
            self.assertEqual(s.request("GET", "/v2", None, bearer("reader"))[0], 200)
            # Fixed, it is re-read at the next check; SIGHUP re-reads it at once.
            self.reload(tokens_file_text())
            s.proc.send_signal(signal.SIGHUP)
            self.assertIsNotNone(s.wait_for_log("received SIGHUP: re-reading credentials"))
            self.assertIsNotNone(s.wait_for_log("reloaded the tokens file %s (SIGHUP)" % self.tokens_path))
            self.assertEqual(s.request("POST", "/v2/models/tiny_mlp/infer", INFER_BODY, bearer("infer"))[0], 200)
        finally:
            stop.set()
            t.join(timeout=120)
        self.assertFalse(t.is_alive())
        self.assertGreater(done[0], 0)
        self.assertEqual(failures, [])
        # The log never shows a token.
        log = "".join(s.log)
        for secret in TOKENS.values():
            self.assertNotIn(secret, log)
        self.assertNotIn("fresh-token-0123456789ab", log)

    def test_a_bad_tokens_file_stops_the_start_naming_the_entry(self):
        bad = os.path.join(C.ARGS.workdir, "security_bad_tokens.json")
        with open(bad, "w") as f:
            f.write(json.dumps({"tokens": [{"name": "short", "token": "too-short", "scopes": ["infer"]}]}))
        out = subprocess.run([C.ARGS.inferd, "serve", "--model-repository", C.REPO, "--auth-tokens-file", bad],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("tokens[0] (short) 'token' must be at least 16", out.stderr)
        self.assertNotIn("too-short", out.stderr)


if __name__ == "__main__":
    unittest.main()


def https_request(port, method, path, body=None, headers=None, cafile=None, cert=None, timeout=60):
    """One request on a new TLS connection (a tritonclient-style HTTPS client: Python's ssl with the CA)."""
    ctx = ssl.create_default_context(cafile=cafile)
    if cert:
        ctx.load_cert_chain(cert[0], cert[1])
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=ctx)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()


def served_subject(port, cafile):
    """The common name of the certificate the port presents now."""
    ctx = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]


def grpc_infer(port, creds, metadata=None):
    pb = C.stubs().pb
    with grpc.secure_channel("127.0.0.1:%d" % port, creds) as ch:
        stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
        req = pb.ModelInferRequest(model_name="tiny_mlp")
        t = req.inputs.add(name="input", datatype="FP32", shape=[1, 16])
        t.contents.fp32_contents.extend(X.flatten().tolist())
        r = stub.ModelInfer(req, timeout=60, metadata=metadata)
        return np.array(r.outputs[0].contents.fp32_contents, np.float32).reshape(1, 4)


class Tls(unittest.TestCase):
    """TLS and mutual TLS on the HTTP, gRPC and metrics ports, with certificates made here (tls_fixtures.py)."""

    @classmethod
    def setUpClass(cls):
        cls.pem = tls_fixtures.make(os.path.join(C.ARGS.workdir, "tls"))

    def creds(self, client=None):
        r = lambda k: open(self.pem[k], "rb").read()  # noqa: E731
        if client:
            return grpc.ssl_channel_credentials(r("ca"), r(client + "_key"), r(client))
        return grpc.ssl_channel_credentials(r("ca"))

    def start(self, *extra):
        return ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                         "--tls-cert-file", self.pem["server"], "--tls-key-file", self.pem["server_key"], *extra)

    def test_clients_with_the_ca_are_served_on_every_port_and_others_are_not(self):
        server = self.start()
        try:
            ca = self.pem["ca"]
            # curl with the CA: served; without it (the certificate cannot be checked): refused by curl.
            url = "https://127.0.0.1:%d/v2/health/ready" % server.port
            ok = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", ca, url],
                                capture_output=True, text=True, timeout=60)
            self.assertEqual(ok.stdout, "200", ok.stderr)
            bad = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url], capture_output=True,
                                 text=True, timeout=60)
            self.assertEqual(bad.stdout, "000")
            self.assertEqual(bad.returncode, 60)  # curl: the peer's certificate could not be authenticated
            # TLS 1.1 and older are refused.
            old = subprocess.run(["curl", "-s", "-o", "/dev/null", "--cacert", ca, "--tlsv1.1", "--tls-max", "1.1",
                                  url], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(old.returncode, 0)
            # Plain HTTP to the TLS port gets no answer; the port stays up.
            with self.assertRaises((http.client.HTTPException, ConnectionError)):
                server.request("GET", "/v2/health/ready")
            # Inference over HTTPS (JSON and the binary extension) and gRPC over TLS: PyTorch's answer.
            st, _, data = https_request(server.port, "POST", "/v2/models/tiny_mlp/infer", INFER_BODY, cafile=ca)
            self.assertEqual(st, 200, data)
            ref = C.torch_ref("tiny_mlp", X)
            got = np.array(json.loads(data)["outputs"][0]["data"], np.float32).reshape(1, 4)
            C.assert_matches_torch(got, ref)
            body, hlen = ic.v2_binary_request({"input": X})
            st, rh, data = https_request(server.port, "POST", "/v2/models/tiny_mlp/infer", body,
                                         {"Inference-Header-Content-Length": str(hlen)}, cafile=ca)
            self.assertEqual(st, 200, data)
            C.assert_matches_torch(ic.decode_v2_response(rh, data)[1]["output"], ref)
            C.assert_matches_torch(grpc_infer(server.grpc_port, self.creds()), ref)
            # gRPC without TLS: refused.
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                with self.assertRaises(grpc.RpcError) as cm:
                    C.stubs().pb_grpc.GRPCInferenceServiceStub(ch).ServerLive(C.stubs().pb.ServerLiveRequest(),
                                                                              timeout=10)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            # inferd's own clients (`inferd models`, `inferd bench`) over TLS: with the CA, and refused without.
            url = "https://127.0.0.1:%d" % server.port
            out = subprocess.run([C.ARGS.inferd, "models", "--url", url, "--cacert", ca], capture_output=True,
                                 text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("tiny_mlp", out.stdout)
            out = subprocess.run([C.ARGS.inferd, "models", "--url", url, "--cacert", self.pem["other_ca"]],
                                 capture_output=True, text=True, timeout=120)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("certificate verify failed", out.stderr)
            row = os.path.join(C.ARGS.workdir, "tls_bench_row.json")
            out = subprocess.run([C.ARGS.inferd, "bench", "-m", "tiny_mlp", "--url", url, "--cacert", ca,
                                  "--concurrency", "2", "--warmup-s", "0", "--duration-s", "1", "--output", row],
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(row) as f:
                r = json.load(f)["rows"][0]
            self.assertGreater(r["requests"], 0)
            self.assertEqual(r["errors"], 0)
            # The metrics port: TLS too; a big answer (more than one TLS record) arrives whole.
            st, _, data = https_request(server.metrics_port, "GET", "/metrics", cafile=ca)
            self.assertEqual(st, 200)
            self.assertGreater(len(data), 16384)
            self.assertIn(b"nv_inference_request_success", data)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_mutual_tls_refuses_clients_without_a_certificate_of_its_ca(self):
        server = self.start("--tls-client-ca-file", self.pem["ca"])
        try:
            ca = self.pem["ca"]
            client = (self.pem["client"], self.pem["client_key"])
            stranger = (self.pem["stranger"], self.pem["stranger_key"])
            st, _, data = https_request(server.port, "POST", "/v2/models/tiny_mlp/infer", INFER_BODY, cafile=ca,
                                        cert=client)
            self.assertEqual(st, 200, data)
            for cert in (None, stranger):
                with self.assertRaises((ssl.SSLError, ConnectionError)):
                    https_request(server.port, "GET", "/v2/health/ready", cafile=ca, cert=cert)
            C.assert_matches_torch(grpc_infer(server.grpc_port, self.creds("client")), C.torch_ref("tiny_mlp", X))
            for creds in (self.creds(), self.creds("stranger")):
                with self.assertRaises(grpc.RpcError) as cm:
                    grpc_infer(server.grpc_port, creds)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            # Triton's gRPC flags name the same files.
        finally:
            self.assertEqual(server.stop(), 0)
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--grpc-use-ssl", "true", "--grpc-server-cert", self.pem["server"], "--grpc-server-key",
                           self.pem["server_key"], "--grpc-root-cert", self.pem["ca"], "--grpc-use-ssl-mutual", "true")
        try:
            self.assertEqual(server.request("GET", "/v2/health/ready")[0], 200)  # HTTP stays plain
            C.assert_matches_torch(grpc_infer(server.grpc_port, self.creds("client")), C.torch_ref("tiny_mlp", X))
            with self.assertRaises(grpc.RpcError):
                grpc_infer(server.grpc_port, self.creds())
        finally:
            self.assertEqual(server.stop(), 0)

    def test_certificates_rotate_under_load_without_losing_a_request(self):
        live = os.path.join(C.ARGS.workdir, "tls_live")
        shutil.rmtree(live, ignore_errors=True)
        os.makedirs(live)
        cert, key = os.path.join(live, "cert.pem"), os.path.join(live, "key.pem")
        shutil.copy(self.pem["server"], cert)
        shutil.copy(self.pem["server_key"], key)
        ca = self.pem["ca"]
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--tls-cert-file", cert, "--tls-key-file", key, "--credentials-check-interval-ms", "100")
        stop = threading.Event()
        failures, counts = [], {"new": 0, "kept": 0, "grpc": 0}

        def new_connections():  # a handshake per request: some with the old certificate, some with the new
            while not stop.is_set():
                try:
                    st, _, data = https_request(server.port, "POST", "/v2/models/tiny_mlp/infer", INFER_BODY,
                                                cafile=ca)
                    if st != 200:
                        failures.append(("new", st, data))
                except Exception as e:  # noqa: BLE001
                    failures.append(("new", repr(e)))
                counts["new"] += 1

        def kept_connection():  # one connection across the rotation: unaffected
            ctx = ssl.create_default_context(cafile=ca)
            c = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=60, context=ctx)
            while not stop.is_set():
                try:
                    c.request("POST", "/v2/models/tiny_mlp/infer", body=INFER_BODY)
                    r = c.getresponse()
                    data = r.read()
                    if r.status != 200:
                        failures.append(("kept", r.status, data))
                except Exception as e:  # noqa: BLE001
                    failures.append(("kept", repr(e)))
                counts["kept"] += 1
            c.close()

        def grpc_client():
            while not stop.is_set():
                try:
                    grpc_infer(server.grpc_port, self.creds())
                except Exception as e:  # noqa: BLE001
                    failures.append(("grpc", repr(e)))
                counts["grpc"] += 1

        threads = [threading.Thread(target=f) for f in (new_connections, kept_connection, grpc_client)]
        try:
            self.assertEqual(served_subject(server.port, ca), "inferd server one")
            for t in threads:
                t.start()
            C.wait_until(self, "requests before the rotation", lambda: min(counts.values()) >= 3, timeout=120)
            # The rotation as a Secret update does it: the new files written aside, then renamed over the old.
            for src, dst in ((self.pem["server2_key"], key), (self.pem["server2"], cert)):
                shutil.copy(src, dst + ".new")
                os.replace(dst + ".new", dst)
            C.wait_until(self, "the HTTP port's new certificate",
                         lambda: served_subject(server.port, ca) == "inferd server two", timeout=60)
            C.wait_until(self, "the metrics port's new certificate",
                         lambda: served_subject(server.metrics_port, ca) == "inferd server two", timeout=60)
            C.wait_until(self, "the gRPC port's new certificate",
                         lambda: served_subject(server.grpc_port, ca) == "inferd server two", timeout=60)
            after = dict(counts)
            C.wait_until(self, "requests after the rotation",
                         lambda: all(counts[k] >= after[k] + 3 for k in counts), timeout=120)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=120)
            rc = server.stop()
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertEqual(failures, [])
        self.assertEqual(rc, 0)
        self.assertTrue(any("reloaded the HTTP TLS certificate" in line for line in server.log))

    def test_bad_tls_settings_stop_the_start_naming_the_file(self):
        def serve(*flags):
            return subprocess.run([C.ARGS.inferd, "serve", "--model-repository", C.REPO, "--model-control-mode",
                                   "explicit", *flags], capture_output=True, text=True, timeout=120)

        out = serve("--tls-cert-file", self.pem["server"], "--tls-key-file", self.pem["client_key"])
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("the TLS key %s does not match the certificate %s" % (self.pem["client_key"], self.pem["server"]),
                      out.stderr)
        self.assertNotIn("model tiny_mlp", out.stderr)  # refused before any model loads
        out = serve("--tls-cert-file", self.pem["server"])
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("--tls-cert-file and --tls-key-file go together", out.stderr)
        out = serve("--tls-cert-file", self.pem["server_key"], "--tls-key-file", self.pem["server_key"])
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("the TLS certificate %s holds no PEM certificate" % self.pem["server_key"], out.stderr)
        out = serve("--grpc-use-ssl-mutual", "true", "--grpc-server-cert", self.pem["server"], "--grpc-server-key",
                    self.pem["server_key"])
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("needs --grpc-root-cert", out.stderr)


def connect_from(source, port):
    """A raw connection to the server from loopback address `source` (127.x.y.z: another client address)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(30)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def ready_answer(s):
    """Sends GET /v2/health/ready on raw socket `s`; what came back (b"" when it was closed unanswered)."""
    s.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        return s.recv(1024)
    except ConnectionResetError:
        return b""


def ready_answered(s):
    return ready_answer(s).startswith(b"HTTP/1.1 200")


class Limits(unittest.TestCase):
    """Limits that a misbehaving client cannot get around: idle connections, slow headers, the connection cap."""

    @classmethod
    def setUpClass(cls):
        # This process holds a thousand sockets too.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))

    def infer_ok(self, server):
        st, _, data = server.request("POST", "/v2/models/tiny_mlp/infer", INFER_BODY)
        self.assertEqual(st, 200, data)

    def test_a_thousand_idle_connections_and_slow_headers_do_not_shut_others_out(self):
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--http-idle-timeout-ms", "3000")
        idle, slow = [], []
        try:
            for _ in range(1000):  # connected, never a byte sent
                idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))
            for _ in range(20):  # a header that never ends (slowloris): a byte now and then
                s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                s.sendall(b"POST /v2/models/tiny_mlp/infer HTTP/1.1\r\nHost: x\r\n")
                slow.append(s)
            for _ in range(20):
                self.infer_ok(server)  # a new connection each: accepted and served beside the thousand
            started = time.monotonic()
            for s in slow:
                s.sendall(b"X-Slow: 1\r\n")
            # Both kinds are cut off once the header's deadline passed (bounded: the deadline is 3 s).
            for s in idle[:50] + slow:
                s.settimeout(60)
                try:
                    self.assertEqual(s.recv(1), b"")
                except ConnectionResetError:
                    pass
            self.assertLess(time.monotonic() - started, 60)
            self.infer_ok(server)
        finally:
            for s in idle + slow:
                s.close()
            self.assertEqual(server.stop(), 0)

    def test_connections_past_the_cap_are_closed_and_the_open_ones_served(self):
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--http-max-connections", "4")
        held = []
        try:
            for _ in range(4):
                c = server.conn()
                c.request("GET", "/v2/health/ready")
                self.assertEqual(c.getresponse().read(), b"")
                held.append(c)
            extra = connect_from("127.0.0.1", server.port)
            self.assertEqual(ready_answer(extra), b"")  # closed without an answer
            extra.close()
            for c in held:  # the open ones: still served
                c.request("POST", "/v2/models/tiny_mlp/infer", body=INFER_BODY)
                self.assertEqual(c.getresponse().status, 200)
            held.pop().close()
            C.wait_until(self, "a place freed", lambda: self.try_ready(server), timeout=30)
            self.assertIsNotNone(server.wait_for_log("the most --http-max-connections allows"))
        finally:
            for c in held:
                c.close()
            self.assertEqual(server.stop(), 0)

    def test_a_client_at_its_connection_cap_is_refused_and_other_clients_served(self):
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--http-max-connections-per-client", "3")
        connect = lambda source: connect_from(source, server.port)  # noqa: E731
        answered = ready_answered
        held = []
        try:
            held = [connect("127.0.0.1") for _ in range(3)]
            for s in held:
                self.assertTrue(answered(s))
            extra = connect("127.0.0.1")
            self.assertEqual(ready_answer(extra), b"")  # its fourth: closed without an answer
            extra.close()
            other = connect("127.0.0.2")  # another client address: served
            self.assertTrue(answered(other))
            other.close()
            for s in held:  # the open ones: still served
                self.assertTrue(answered(s))
            held.pop().close()

            def a_place_freed():
                s = connect("127.0.0.1")
                try:
                    return answered(s)
                finally:
                    s.close()
            C.wait_until(self, "a place freed", a_place_freed, timeout=30)
            self.assertIsNotNone(server.wait_for_log("--http-max-connections-per-client allows"))
        finally:
            for s in held:
                s.close()
            self.assertEqual(server.stop(), 0)

    def test_json_bodies_past_their_limits_are_refused(self):
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--json-max-elements", "100", "--json-max-depth", "8")
        try:
            self.infer_ok(server)  # 27 values, 4 deep
            many = json.dumps({"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32",
                                           "data": [1.0] * 16}], "id": "x", "parameters": {"pad": list(range(90))}})
            st, _, data = server.request("POST", "/v2/models/tiny_mlp/infer", many.encode())
            self.assertEqual(st, 413, data)
            self.assertIn("more than 100 values (--json-max-elements)", json.loads(data)["error"])
            deep = b'{"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": [[[[[[[1]]]]]]]}]}'
            st, _, data = server.request("POST", "/v2/models/tiny_mlp/infer", deep)
            self.assertEqual(st, 400, data)
            self.assertIn("nests deeper than 8 levels (--json-max-depth)", json.loads(data)["error"])
            for path, body in (("/v1/models/tiny_mlp:predict", {"instances": [list(range(200))]}),
                               ("/v1/chat/completions", {"model": "x", "messages": [{"role": "user", "content": "a"}],
                                                         "stop": ["s"] * 200})):
                st, _, data = server.request("POST", path, json.dumps(body).encode())
                self.assertEqual(st, 413, (path, data))
            self.infer_ok(server)
        finally:
            self.assertEqual(server.stop(), 0)

    @staticmethod
    def try_ready(server):
        try:
            return server.request("GET", "/v2/health/ready")[0] == 200
        except (ConnectionError, http.client.HTTPException):
            return False

    def test_a_grpc_connection_holds_at_most_its_streams(self):
        server = ic.Server(C.ARGS.inferd, C.REPO, "--model-control-mode", "explicit", "--load-model", "tiny_mlp",
                           "--grpc-max-concurrent-streams", "1")
        pb = C.stubs().pb
        try:
            with grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port) as ch:
                stub = C.stubs().pb_grpc.GRPCInferenceServiceStub(ch)
                self.assertTrue(stub.ServerLive(pb.ServerLiveRequest(), timeout=60).live)
                outgoing = queue.Queue()

                def requests():  # a stream that stays open until told
                    while True:
                        item = outgoing.get(timeout=120)
                        if item is None:
                            return
                        yield item

                req = pb.ModelInferRequest(model_name="tiny_mlp")
                t = req.inputs.add(name="input", datatype="FP32", shape=[1, 16])
                t.contents.fp32_contents.extend([1.0] * 16)
                stream = stub.ModelStreamInfer(requests(), timeout=120)
                outgoing.put(req)
                self.assertEqual(next(stream).error_message, "")  # the stream is open and served
                # The one stream the connection may hold is taken: the next call waits for it (bounded here).
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.ServerLive(pb.ServerLiveRequest(), timeout=1)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
                outgoing.put(None)
                self.assertEqual(list(stream), [])
                self.assertTrue(stub.ServerLive(pb.ServerLiveRequest(), timeout=60).live)
        finally:
            self.assertEqual(server.stop(), 0)
