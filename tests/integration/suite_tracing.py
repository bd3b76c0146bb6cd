"""Tracing (OpenTelemetry over OTLP/HTTP) and the access log, against a receiver of the test's own
(otlp_receiver.py): the span tree of a plain request, an ensemble, a BLS call and a generative stream; W3C
traceparent honoured and returned over HTTP and gRPC; a collector that is gone costs no request and its drops are
counted; the access log's lines. docs/observability.md. Stages: ASan and release."""
import http.client
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
import otlp_receiver  # noqa: E402

MODELS = ("mlp", "scale2", "pipe_chain", "py_bls", "py_add_sub", "tiny_chat")
RECEIVER = None
SERVER = None
ACCESS_LOG = None
PARENT = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TOLERANCE_NS = 2_000_000  # span times come from two clock readings each: nesting is checked to 2 ms


def setUpModule():
    global RECEIVER, SERVER, ACCESS_LOG
    C.fixture_repository()
    repo = C.served_repository("suite_tracing", MODELS)
    pb = otlp_receiver.otlp_messages(C.ROOT, os.path.join(C.ARGS.workdir, "otlp_stubs", str(os.getpid())))
    RECEIVER = otlp_receiver.Receiver(pb)
    ACCESS_LOG = os.path.join(C.ARGS.workdir, "tracing_access_%d.log" % os.getpid())
    if os.path.exists(ACCESS_LOG):
        os.remove(ACCESS_LOG)
    SERVER = ic.Server(C.ARGS.inferd, repo, "--trace-config", "mode=opentelemetry", "--trace-config", "rate=1",
                       "--trace-config", "level=TIMESTAMPS", "--trace-config", "opentelemetry,url=" + RECEIVER.url,
                       "--trace-config", "opentelemetry,bsp_schedule_delay=50",
                       "--trace-config", "opentelemetry,resource=deployment.environment=test",
                       "--access-log", ACCESS_LOG)


def tearDownModule():
    if SERVER:
        rc = SERVER.stop()
        assert rc == 0, "".join(SERVER.log[-30:])
    if RECEIVER:
        RECEIVER.stop()


def by_name(spans, name):
    return [s for s in spans if s["name"] == name]


def one(test, spans, name):
    found = by_name(spans, name)
    test.assertEqual(len(found), 1, [(s["name"], s["parent"]) for s in spans])
    return found[0]


def complete(names):
    """A wait condition: the trace holds at least these spans (name -> count)."""
    def done(spans):
        return all(len(by_name(spans, n)) >= k for n, k in names.items())
    return done


def traceparent_of(headers):
    tp = headers.get("traceparent")
    assert tp, headers
    version, trace_id, span_id, flags = tp.split("-")
    assert (version, flags) == ("00", "01"), tp
    return trace_id, span_id


class Tracing(unittest.TestCase):
    def assert_child(self, child, parent):
        self.assertEqual(child["parent"], parent["span_id"], (child["name"], parent["name"]))
        self.assertEqual(child["trace_id"], parent["trace_id"])
        self.assertGreaterEqual(child["start"] + TOLERANCE_NS, parent["start"], (child["name"], parent["name"]))
        self.assertLessEqual(child["end"], parent["end"] + TOLERANCE_NS, (child["name"], parent["name"]))

    def assert_model_span(self, span, parent, model):
        self.assert_child(span, parent)
        self.assertEqual(span["attributes"]["triton.model_name"], model)
        self.assertEqual(span["attributes"]["triton.model_version"], 1)
        self.assertEqual([e[0] for e in span["events"]], ["REQUEST_START", "REQUEST_END"])

    def assert_executed(self, spans, model_span):
        """The model span's queue and compute children (Triton's COMPUTE_* events on compute)."""
        queue = [s for s in by_name(spans, "queue") if s["parent"] == model_span["span_id"]]
        compute = [s for s in by_name(spans, "compute") if s["parent"] == model_span["span_id"]]
        self.assertEqual((len(queue), len(compute)), (1, 1), model_span["name"])
        self.assert_child(compute[0], model_span)
        self.assertLessEqual(queue[0]["end"], compute[0]["start"] + TOLERANCE_NS)
        self.assertEqual([e[0] for e in compute[0]["events"]],
                         ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"])
        self.assertGreaterEqual(compute[0]["attributes"]["inferd.batch_size"], 1)
        self.assertIn("inferd.instance", compute[0]["attributes"])

    def test_a_request_is_a_root_span_with_its_model_queue_and_compute(self):
        x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
        st, hdrs, data = SERVER.request("POST", "/v2/models/mlp/infer", json.dumps(ic.v2_json_request({"x": x})).encode(),
                                        {"Content-Type": "application/json"})
        self.assertEqual(st, 200, data)
        C.assert_matches_torch(np.asarray(json.loads(data)["outputs"][0]["data"], np.float32).reshape(2, -1),
                               C.torch_ref("mlp", x))
        trace_id, span_id = traceparent_of(hdrs)
        spans = RECEIVER.trace(trace_id, complete({"InferRequest": 1, "mlp": 1, "queue": 1, "compute": 1}))
        root = one(self, spans, "InferRequest")
        self.assertEqual(root["span_id"], span_id)  # the header names the server's span
        self.assertIsNone(root["parent"])
        self.assertEqual(root["kind"], 2)  # SERVER
        self.assertEqual(root["attributes"]["inferd.protocol"], "http")
        self.assertEqual(root["attributes"]["http.response.status_code"], 200)
        self.assertEqual(root["attributes"]["url.path"], "/v2/models/mlp/infer")
        self.assertEqual(root["attributes"]["triton.model_name"], "mlp")
        self.assertEqual(root["attributes"]["triton.model_version"], "1")
        model = one(self, spans, "mlp")
        self.assert_model_span(model, root, "mlp")
        self.assert_executed(spans, model)
        self.assertEqual(set(s["name"] for s in spans), {"InferRequest", "mlp", "queue", "compute"})
        self.assertIn({"service.name": "inferd", "deployment.environment": "test"}, RECEIVER.resources)

    def test_a_sampled_traceparent_is_continued_over_http_and_grpc(self):
        x = np.ones((1, 8), np.float32)
        sent = "00-%s-%s-01" % (PARENT, PARENT_SPAN)
        st, hdrs, data = SERVER.request("POST", "/v2/models/mlp/infer", json.dumps(ic.v2_json_request({"x": x})).encode(),
                                        {"traceparent": sent, "tracestate": "vendor=abc"})
        self.assertEqual(st, 200, data)
        trace_id, span_id = traceparent_of(hdrs)
        self.assertEqual(trace_id, PARENT)
        self.assertNotEqual(span_id, PARENT_SPAN)
        # The same trace continued over gRPC: the call's metadata in, the initial metadata out.
        import grpc
        s = C.stubs()
        grpc_parent = "1111111111111111"
        with grpc.insecure_channel("127.0.0.1:%d" % SERVER.grpc_port) as ch:
            resp, call = s.pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer.with_call(
                gc_request(s, x), timeout=60, metadata=[("traceparent", "00-%s-%s-01" % (PARENT, grpc_parent))])
        self.assertEqual(resp.model_name, "mlp")
        md = dict(call.initial_metadata())
        g_trace, g_span = md["traceparent"].split("-")[1:3]
        self.assertEqual(g_trace, PARENT)
        spans = RECEIVER.trace(PARENT, complete({"InferRequest": 2, "mlp": 2, "compute": 2}))
        roots = {s["parent"]: s for s in by_name(spans, "InferRequest")}
        self.assertEqual(set(roots), {PARENT_SPAN, grpc_parent})
        self.assertEqual(roots[PARENT_SPAN]["span_id"], span_id)
        self.assertEqual(roots[PARENT_SPAN]["trace_state"], "vendor=abc")
        self.assertEqual(roots[grpc_parent]["span_id"], g_span)
        self.assertEqual(roots[grpc_parent]["attributes"]["rpc.system"], "grpc")
        self.assertEqual(roots[grpc_parent]["attributes"]["rpc.grpc.status_code"], 0)
        for root in roots.values():
            models = [m for m in by_name(spans, "mlp") if m["parent"] == root["span_id"]]
            self.assertEqual(len(models), 1)
            self.assert_executed(spans, models[0])
        # A caller that did not sample its trace is not traced here either (no header back).
        st, hdrs, _ = SERVER.request("POST", "/v2/models/mlp/infer", json.dumps(ic.v2_json_request({"x": x})).encode(),
                                     {"traceparent": "00-%s-%s-00" % ("5" * 32, PARENT_SPAN)})
        self.assertEqual(st, 200)
        self.assertNotIn("traceparent", hdrs)

    def test_an_ensembles_steps_are_children_of_its_model_span(self):
        x = np.random.default_rng(5).standard_normal((1, 8)).astype(np.float32)
        st, hdrs, data = SERVER.request("POST", "/v2/models/pipe_chain/infer",
                                        json.dumps(ic.v2_json_request({"raw": x})).encode())
        self.assertEqual(st, 200, data)
        trace_id, _ = traceparent_of(hdrs)
        spans = RECEIVER.trace(trace_id, complete({"InferRequest": 1, "pipe_chain": 1, "scale2": 1, "mlp": 1,
                                                   "compute": 2}))
        root = one(self, spans, "InferRequest")
        ensemble = one(self, spans, "pipe_chain")
        self.assert_model_span(ensemble, root, "pipe_chain")
        for step in ("scale2", "mlp"):
            span = one(self, spans, step)
            self.assert_model_span(span, ensemble, step)
            self.assert_executed(spans, span)
        self.assertLessEqual(one(self, spans, "scale2")["end"], one(self, spans, "mlp")["start"] + TOLERANCE_NS)

    def test_bls_calls_are_children_of_the_calling_models_span(self):
        a = np.array([1, 2, 3, 4], np.float32)
        b = np.array([0.5, 0.5, 0.5, 0.5], np.float32)
        body = ic.v2_json_request({"INPUT0": a, "INPUT1": b})
        body["inputs"].append({"name": "MODEL_NAME", "datatype": "BYTES", "shape": [1], "data": ["py_add_sub"]})
        st, hdrs, data = SERVER.request("POST", "/v2/models/py_bls/infer", json.dumps(body).encode())
        self.assertEqual(st, 200, data)
        outs = {o["name"]: o["data"] for o in json.loads(data)["outputs"]}
        self.assertEqual(outs["SUM"], (a + b).tolist())
        trace_id, _ = traceparent_of(hdrs)
        spans = RECEIVER.trace(trace_id, complete({"InferRequest": 1, "py_bls": 1, "py_add_sub": 3}))
        caller = one(self, spans, "py_bls")
        self.assert_model_span(caller, one(self, spans, "InferRequest"), "py_bls")
        calls = by_name(spans, "py_add_sub")
        self.assertEqual(len(calls), 3)  # one call, then two at once (the fixture's execute)
        for call in calls:
            self.assert_model_span(call, caller, "py_add_sub")

    def test_a_generative_stream_records_prefill_first_token_and_tokens(self):
        c = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=120)
        c.request("POST", "/v1/chat/completions", json.dumps({
            "model": "tiny_chat", "messages": [{"role": "user", "content": "What is free software?"}],
            "max_tokens": 6, "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
            "ignore_eos": True}), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        hdrs = dict((k.lower(), v) for k, v in r.getheaders())
        c.close()
        self.assertEqual(r.status, 200, data[:300])
        events = [b[len("data: "):] for b in data.decode().split("\n\n") if b.strip()]
        usage = json.loads(events[-2])["usage"]
        trace_id, _ = traceparent_of(hdrs)
        spans = RECEIVER.trace(trace_id, complete({"InferRequest": 1, "tiny_chat": 1, "generate": 1, "decode": 1}))
        root = one(self, spans, "InferRequest")
        self.assertEqual(root["attributes"]["url.path"], "/v1/chat/completions")
        self.assertEqual(root["attributes"]["triton.model_name"], "tiny_chat")  # named in the body
        model = one(self, spans, "tiny_chat")
        self.assert_model_span(model, root, "tiny_chat")
        gen = one(self, spans, "generate")
        self.assert_child(gen, model)
        self.assertEqual(gen["attributes"]["gen_ai.usage.output_tokens"], usage["completion_tokens"])
        self.assertEqual(gen["attributes"]["gen_ai.usage.input_tokens"], usage["prompt_tokens"])
        self.assertEqual(gen["attributes"]["inferd.preemptions"], 0)
        self.assertGreater(gen["attributes"]["inferd.time_to_first_token_ms"], 0)
        self.assertEqual([e[0] for e in gen["events"]], ["first_token"])
        for phase in ("queue", "prefill", "decode"):
            self.assert_child(one(self, spans, phase), gen)
        self.assertLessEqual(one(self, spans, "prefill")["end"], one(self, spans, "decode")["start"] + TOLERANCE_NS)
        # The access log's line names the model the body named, and the version that answered.

        def mine():
            with open(ACCESS_LOG) as f:
                return [json.loads(line) for line in f if trace_id in line]
        C.wait_until(self, "the call's access-log line", lambda: mine())
        self.assertEqual((mine()[0]["model"], mine()[0]["version"], mine()[0]["target"]),
                         ("tiny_chat", "1", "/v1/chat/completions"))

    def test_the_access_log_has_a_line_per_request_with_its_trace(self):
        x = np.ones((1, 8), np.float32)
        st, hdrs, _ = SERVER.request("POST", "/v2/models/mlp/infer", json.dumps(ic.v2_json_request({"x": x})).encode(),
                                     {"Authorization": "Bearer secret-token"})
        self.assertEqual(st, 200)
        trace_id, _ = traceparent_of(hdrs)
        st, _, _ = SERVER.request("POST", "/v2/models/no_such_model/infer?secret=1", b"{}")
        self.assertEqual(st, 404)

        def lines():
            with open(ACCESS_LOG) as f:
                return [json.loads(line) for line in f]
        C.wait_until(self, "the access-log lines", lambda: any(
            l.get("trace_id") == trace_id for l in lines()) and any(l.get("status") == 404 for l in lines()))
        mine = next(l for l in lines() if l.get("trace_id") == trace_id)
        self.assertEqual((mine["protocol"], mine["method"], mine["target"], mine["model"], mine["version"],
                          mine["status"]), ("http", "POST", "/v2/models/mlp/infer", "mlp", "1", 200))
        self.assertGreater(mine["latency_ms"], 0)
        self.assertGreater(mine["bytes_in"], 0)
        self.assertGreater(mine["bytes_out"], 0)
        self.assertRegex(mine["client"], r"^127\.0\.0\.1:\d+$")
        self.assertRegex(mine["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        # A gRPC stream: a line per request, one that could not be decoded too (INVALID_ARGUMENT, 3).
        import grpc
        s = C.stubs()
        good = gc_request(s, x)
        bad = gc_request(s, x)
        bad.id = "undecodable"
        bad.inputs[0].datatype = "BOGUS"
        with grpc.insecure_channel("127.0.0.1:%d" % SERVER.grpc_port) as ch:
            answers = list(s.pb_grpc.GRPCInferenceServiceStub(ch).ModelStreamInfer(iter([good, bad]), timeout=60))
        self.assertEqual(sorted(bool(a.error_message) for a in answers), [False, True], answers)
        C.wait_until(self, "the stream's access-log lines", lambda: sum(
            l.get("method") == "ModelStreamInfer" for l in lines()) >= 2)
        stream = [l for l in lines() if l.get("method") == "ModelStreamInfer"]
        self.assertEqual(sorted((l["status"], l["model"], l.get("request_id", "")) for l in stream),
                         [(0, "mlp", ""), (3, "mlp", "undecodable")], stream)
        missing = next(l for l in lines() if l.get("status") == 404)
        self.assertEqual(missing["target"], "/v2/models/no_such_model/infer")  # never the query string
        with open(ACCESS_LOG) as f:
            text = f.read()
        self.assertNotIn("secret", text)  # neither tokens nor query strings are logged
        self.assertGreaterEqual(C.metric(SERVER.metrics(), 'inferd_access_log_lines_total{outcome="written"}'), 2)

    def test_otlp_json_carries_the_same_spans_and_whole_requests_per_export(self):
        receiver = otlp_receiver.Receiver(RECEIVER.pb)
        repo = C.served_repository("suite_tracing_json", ["mlp"])
        # Small batches: several exports, each with whole requests (4 spans each), in OTLP's JSON form.
        server = ic.Server(C.ARGS.inferd, repo, "--trace-config", "mode=opentelemetry", "--trace-config", "rate=1",
                           "--trace-config", "opentelemetry,url=" + receiver.url,
                           "--trace-config", "opentelemetry,protocol=http/json",
                           "--trace-config", "opentelemetry,bsp_schedule_delay=20",
                           "--trace-config", "opentelemetry,bsp_max_export_batch_size=6")
        try:
            x = np.random.default_rng(5).standard_normal((1, 8)).astype(np.float32)
            ids = []
            conn = server.conn()
            for _ in range(5):
                st, hdrs, data = server.request("POST", "/v2/models/mlp/infer",
                                                json.dumps(ic.v2_json_request({"x": x})).encode(), conn=conn)
                self.assertEqual(st, 200, data)
                ids.append(traceparent_of(hdrs))
            for trace_id, span_id in ids:
                spans = receiver.trace(trace_id, complete({"InferRequest": 1, "mlp": 1, "queue": 1, "compute": 1}))
                root = one(self, spans, "InferRequest")
                self.assertEqual(root["span_id"], span_id)
                self.assertEqual(root["attributes"]["url.path"], "/v2/models/mlp/infer")
                model = one(self, spans, "mlp")
                self.assert_model_span(model, root, "mlp")
                self.assert_executed(spans, model)
            self.assertGreater(receiver.bodies["json"], 0)
            self.assertEqual(receiver.bodies["protobuf"], 0)
            # Counted once the collector's answer is read, just after it took the last body.
            C.wait_until(self, "20 spans counted as exported",
                         lambda: C.metric(server.metrics(), "inferd_trace_spans_exported_total") == 20)
            text = server.metrics()
            # A batch closes at 6 spans or more, whole requests only: 5 requests go in at most 5 exports of 4 or 8.
            self.assertLessEqual(C.metric(text, 'inferd_trace_exports_total{result="ok"}'), 5)
        finally:
            server.stop()
            receiver.stop()

    def test_a_collector_that_is_gone_costs_no_request_and_drops_are_counted(self):
        gone = otlp_receiver.Receiver(RECEIVER.pb)
        url = gone.url
        gone.stop()  # nothing listens there now
        repo = C.served_repository("suite_tracing_gone", ["mlp"])
        server = ic.Server(C.ARGS.inferd, repo, "--trace-config", "mode=opentelemetry", "--trace-config", "rate=1",
                           "--trace-config", "opentelemetry,url=" + url,
                           "--trace-config", "opentelemetry,bsp_schedule_delay=20",
                           "--trace-config", "opentelemetry,bsp_max_queue_size=64",
                           "--trace-config", "opentelemetry,bsp_max_export_batch_size=8")
        try:
            x = np.random.default_rng(9).standard_normal((1, 8)).astype(np.float32)
            want = C.torch_ref("mlp", x)
            conn = server.conn()
            for _ in range(200):
                st, hdrs, data = server.request("POST", "/v2/models/mlp/infer",
                                                json.dumps(ic.v2_json_request({"x": x})).encode(), conn=conn)
                self.assertEqual(st, 200, data)
                self.assertIn("traceparent", hdrs)
                C.assert_matches_torch(np.asarray(json.loads(data)["outputs"][0]["data"], np.float32).reshape(1, -1),
                                       want)

            def dropped():
                t = server.metrics()
                return (C.metric(t, 'inferd_trace_spans_dropped_total{reason="export_failed"}') +
                        C.metric(t, 'inferd_trace_spans_dropped_total{reason="queue_full"}'))
            # 200 requests x 4 spans: every one dropped (the export failed or the queue was full), none exported.
            C.wait_until(self, "every span counted as dropped", lambda: dropped() == 800)
            text = server.metrics()
            self.assertEqual(C.metric(text, "inferd_trace_spans_exported_total"), 0)
            self.assertGreater(C.metric(text, 'inferd_trace_exports_total{result="failed"}'), 0)
            self.assertEqual(C.metric(text, 'inferd_traces_started_total{by="rate"}'), 200)
        finally:
            rc = server.stop()
        self.assertEqual(rc, 0, "".join(server.log[-20:]))

    def test_bad_trace_flags_stop_the_server_with_the_reason(self):
        repo = C.served_repository("suite_tracing_bad", ["mlp"])
        # Each setting's checks are unit tests (tracing_test.cc); here: that a bad one stops the start, with why.
        for flags, says in ((["--trace-config", "mode=opentelemetry", "--trace-config", "rate=x"], "rate"),
                            (["--access-log", "/no/such/dir/access.log"], "cannot open")):
            with self.subTest(flags=flags):
                with self.assertRaises(RuntimeError) as ctx:
                    ic.Server(C.ARGS.inferd, repo, *flags)
                self.assertIn(says, str(ctx.exception))


def gc_request(stubs, x):
    import grpc_client as gc
    return gc.infer_request(stubs.pb, "mlp", {"x": x})


if __name__ == "__main__":
    unittest.main()
