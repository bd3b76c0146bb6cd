"""A small test harness: starts the real inferd binary and talks to it.

Standard library only (http.client, json, struct, gzip) plus numpy for
tensors. The server is started on free ports (--http-port 0); its log is read
to learn the ports, and drained in the background so it never blocks.
"""
import gzip
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading

import numpy as np

WIRE = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP16": np.float16,
    "FP32": np.float32, "FP64": np.float64,
}


def wire_type(arr):
    for k, v in WIRE.items():
        if arr.dtype == np.dtype(v):
            return k
    raise ValueError(arr.dtype)


def state_dir(repo):
    """The control-state directory tests give a server of `repo` (beside it, so
    a restarted server finds its labels and nothing lands in $HOME)."""
    return os.path.abspath(repo).rstrip("/") + ".state"


def remove_repository(repo):
    """Removes a test repository and its control state (labels)."""
    shutil.rmtree(repo, ignore_errors=True)
    shutil.rmtree(state_dir(repo), ignore_errors=True)


def thread_backtraces(pid):
    """Where each thread of process `pid` is (gdb), for a test to print when a server hangs."""
    if not shutil.which("gdb"):
        return "(no gdb to show the threads)"
    bt = subprocess.run(["gdb", "-batch", "-p", str(pid), "-ex", "thread apply all bt 12"], capture_output=True,
                        text=True, timeout=120)
    return bt.stdout[-20000:]


class Server:
    # Start-up includes loading every model of the repository; under the sanitizers on a busy 2-core machine that
    # takes tens of seconds. A start that takes longer than this is reported as a hang (with the server's threads).
    START_TIMEOUT_S = 300

    def __init__(self, binary, repo, *extra):
        self.log = []
        state = [] if "--control-state-dir" in extra else ["--control-state-dir", state_dir(repo)]
        self.proc = subprocess.Popen(
            [binary, "serve", "--model-repository", repo, "--http-port", "0", "--metrics-port", "0",
             "--grpc-port", "0", "--host", "127.0.0.1", *state, *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        want = {"HTTP", "Metrics", "gRPC"}
        flags = list(extra)
        for flag, service in (("--allow-grpc", "gRPC"), ("--allow-metrics", "Metrics")):
            if flag in flags and flags[flags.index(flag) + 1] == "false":
                want.discard(service)
        self._log_cv = threading.Condition()
        self._eof = False
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()
        ports = {}
        seen = 0  # log lines already looked at

        def started():
            nonlocal seen
            for line in self.log[seen:]:
                m = re.search(r"(HTTP|Metrics|gRPC) service listening on [\d.]+:(\d+)", line)
                if m:
                    ports[m.group(1)] = int(m.group(2))
            seen = len(self.log)
            return set(ports) == want or self._eof

        with self._log_cv:
            self._log_cv.wait_for(started, timeout=self.START_TIMEOUT_S)
        if set(ports) != want:
            if self._eof:  # it closed its log: it is exiting (a bad flag, say), not hanging
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
            if self.proc.poll() is None:
                self._show_hang("inferd did not start within %d s" % self.START_TIMEOUT_S)
                self.proc.kill()
                self.proc.wait(timeout=30)
            raise RuntimeError("inferd did not start:\n" + "".join(self.log))
        self.port, self.metrics_port, self.grpc_port = ports["HTTP"], ports.get("Metrics"), ports.get("gRPC")

    def _read_rest(self):
        for line in self.proc.stderr:
            with self._log_cv:
                self.log.append(line)
                self._log_cv.notify_all()
        with self._log_cv:
            self._eof = True
            self._log_cv.notify_all()

    def _show_hang(self, what):
        """Prints what the server said last and where its threads are (for a start or stop that hangs)."""
        with self._log_cv:
            print("%s; its log ends:\n%s" % (what, "".join(self.log[-40:])))
        print(thread_backtraces(self.proc.pid))

    def wait_for_log(self, text, timeout=30):
        """Waits (bounded) until a log line contains `text`; returns the line or None."""
        def found():
            return next((line for line in self.log if text in line), None)
        with self._log_cv:
            self._log_cv.wait_for(found, timeout=timeout)
            return found()

    # An ssl.SSLContext when the server's ports speak TLS: request(), conn() and metrics() then use HTTPS.
    ssl_context = None

    def conn(self, timeout=60, port=None):
        if self.ssl_context is not None:
            return http.client.HTTPSConnection("127.0.0.1", port or self.port, timeout=timeout,
                                               context=self.ssl_context)
        return http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=timeout)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # A stop that hangs: show what the server said and where its threads are, then kill it.
            self._show_hang("inferd did not stop within %d s" % timeout)
            self.proc.kill()
            self.proc.wait(timeout=30)
            raise
        self._drain.join(timeout=10)
        self.proc.stderr.close()
        if rc != 0:  # it died (a crash, a sanitizer's report) or failed its stop: what it said last
            print("inferd exited with %d; the end of its log:\n%s" % (rc, "".join(self.log[-150:])), file=sys.stderr)
        # A lifecycle move the state machine refused (manager/model_state.h) is a bug even when nothing else
        # failed: it fails every test that stops a server (they all check the exit status).
        bugs = [line for line in self.log if "(a bug; the state stays)" in line]
        if bugs and rc == 0:
            print("inferd logged illegal lifecycle transitions:\n" + "".join(bugs), file=sys.stderr)
            return 70
        return rc

    # --- requests -------------------------------------------------------
    def request(self, method, path, body=None, headers=None, conn=None, port=None):
        c = conn or self.conn(timeout=120, port=port)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        if conn is None:
            c.close()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data

    def get_json(self, path):
        status, _, data = self.request("GET", path)
        return status, (json.loads(data) if data else None)

    def post_json(self, path, obj, headers=None, conn=None):
        status, hdrs, data = self.request("POST", path, json.dumps(obj).encode(), headers, conn)
        return status, (json.loads(data) if data else None)

    def metrics(self):
        _, _, data = self.request("GET", "/metrics", port=self.metrics_port)
        return data.decode()


def v2_json_request(inputs, outputs=None, params=None):
    """inputs: {name: ndarray}. Returns the JSON body (dict)."""
    body = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": wire_type(a), "data": a.flatten().tolist()}
                       for n, a in inputs.items()]}
    if outputs is not None:
        body["outputs"] = outputs
    if params:
        body["parameters"] = params
    return body


def v2_binary_request(inputs, binary_output=True):
    """Returns (body bytes, header length) with every input as binary data."""
    header = {"inputs": [], "parameters": {"binary_data_output": binary_output}}
    raw = b""
    for n, a in inputs.items():
        b = np.ascontiguousarray(a).tobytes()
        header["inputs"].append({"name": n, "shape": list(a.shape), "datatype": wire_type(a),
                                 "parameters": {"binary_data_size": len(b)}})
        raw += b
    h = json.dumps(header).encode()
    return h + raw, len(h)


def decode_v2_response(headers, data):
    """Returns {name: ndarray} from a JSON or binary v2 infer response."""
    hlen = headers.get("inference-header-content-length")
    if headers.get("content-encoding") == "gzip":
        data = gzip.decompress(data)
    if hlen is None:
        js, rest = json.loads(data), b""
    else:
        hlen = int(hlen)
        js, rest = json.loads(data[:hlen]), data[hlen:]
    out, off = {}, 0
    for o in js["outputs"]:
        if o["datatype"] == "BYTES":  # a list: JSON strings, or binary 4-byte-length-prefixed elements
            if "data" in o:
                out[o["name"]] = o["data"]
                continue
            raw, items = rest[off:off + o["parameters"]["binary_data_size"]], []
            off += len(raw)
            while raw:
                n = int.from_bytes(raw[:4], "little")
                items.append(raw[4:4 + n])
                raw = raw[4 + n:]
            out[o["name"]] = items
            continue
        dt = WIRE[o["datatype"]]
        if "data" in o:
            out[o["name"]] = np.array(o["data"], dtype=dt).reshape(o["shape"])
        else:
            size = o["parameters"]["binary_data_size"]
            out[o["name"]] = np.frombuffer(rest[off:off + size], dtype=dt).reshape(o["shape"])
            off += size
    return js, out
