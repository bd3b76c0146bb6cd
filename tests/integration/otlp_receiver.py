"""A small OTLP/HTTP trace receiver for the tracing tests: POST /v1/traces with an ExportTraceServiceRequest
(protobuf, read with the messages protoc makes from proto/otlp_trace.proto, or OTLP's JSON form). Keeps every span
it received, normalised to dicts (ids as lower-case hex, attributes as a dict of plain values, events as
[(name, time)]), and can be told to refuse (503) or be stopped."""
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_PB = {}


def otlp_messages(root, out_dir):
    """The module protoc makes from proto/otlp_trace.proto (once per process)."""
    if "m" not in _PB:
        os.makedirs(out_dir, exist_ok=True)
        subprocess.check_call(["protoc", "-I", os.path.join(root, "proto"), "--python_out", out_dir,
                               os.path.join(root, "proto", "otlp_trace.proto")])
        if out_dir not in sys.path:
            sys.path.insert(0, out_dir)
        import otlp_trace_pb2
        _PB["m"] = otlp_trace_pb2
    return _PB["m"]


def _value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def _json_value(v):
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return v["boolValue"]
    return None


class Receiver:
    def __init__(self, pb):
        self.pb = pb
        self.spans = []
        self.bodies = {"protobuf": 0, "json": 0}
        self.resources = []
        self.refuse = False
        self.cv = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if receiver.refuse or self.path != "/v1/traces":
                    self.send_response(503 if receiver.refuse else 404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                ctype = self.headers.get("Content-Type", "")
                receiver._take(body, ctype)
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d/v1/traces" % self.port

    def _take(self, body, ctype):
        spans, resource = [], {}
        if ctype.startswith("application/x-protobuf"):
            req = self.pb.ExportTraceServiceRequest()
            req.ParseFromString(body)
            kind = "protobuf"
            for rs in req.resource_spans:
                resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        spans.append({
                            "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                            "parent": s.parent_span_id.hex() or None, "name": s.name, "kind": int(s.kind),
                            "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                            "attributes": {a.key: _value(a.value) for a in s.attributes},
                            "events": [(e.name, e.time_unix_nano) for e in s.events],
                            "status": int(s.status.code), "trace_state": s.trace_state})
        else:
            req = json.loads(body)
            kind = "json"
            for rs in req["resourceSpans"]:
                resource = {a["key"]: _json_value(a["value"]) for a in rs["resource"].get("attributes", [])}
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        spans.append({
                            "trace_id": s["traceId"], "span_id": s["spanId"], "parent": s.get("parentSpanId"),
                            "name": s["name"], "kind": s["kind"], "start": int(s["startTimeUnixNano"]),
                            "end": int(s["endTimeUnixNano"]),
                            "attributes": {a["key"]: _json_value(a["value"]) for a in s.get("attributes", [])},
                            "events": [(e["name"], int(e["timeUnixNano"])) for e in s.get("events", [])],
                            "status": s.get("status", {}).get("code", 0), "trace_state": s.get("traceState", "")})
        with self.cv:
            self.spans.extend(spans)
            self.bodies[kind] += 1
            self.resources.append(resource)
            self.cv.notify_all()

    def trace(self, trace_id, until, timeout=60):
        """The spans of trace `trace_id` once `until(spans)` holds (bounded wait)."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                spans = [s for s in self.spans if s["trace_id"] == trace_id]
                if until(spans):
                    return spans
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("trace %s incomplete after %d s: %s" % (
                        trace_id, timeout, [(s["name"], s["parent"]) for s in spans]))
                self.cv.wait(left)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
