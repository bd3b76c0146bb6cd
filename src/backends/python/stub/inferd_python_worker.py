"""inferd's Python worker: runs one instance of a model.py (Triton's Python backend API) for the server.

The server starts one worker per model instance (backends/python/worker_process.cc) as
`python3 -c BOOTSTRAP <socket fd> <to-worker memfd> <to-server memfd>`; the bootstrap reads this module and
triton_python_backend_utils from the socket and calls main(). Protocol (backends/python/protocol.h): frames of
a 4-byte little-endian length and a JSON object over the socket; tensor bytes never cross the socket: the server
writes inputs (and BLS answers) into the to-worker region, the worker writes outputs (and BLS inputs) into the
to-server region, and the JSON gives offsets. Each side grows only the region it writes (ftruncate) and says its
size in every message.
"""
import asyncio
import inspect
import itertools
import json
import mmap
import os
import select
import sys
import threading
import traceback

import numpy as np

import triton_python_backend_utils as pb_utils

_ALIGN = 64


class ProtocolError(Exception):
    pass


class Channel:
    def __init__(self, sock, in_fd, out_fd):
        self._sock = sock
        self._in_fd = in_fd
        self._out_fd = out_fd
        self._in_map = None
        self._in_size = 0
        self._out_size = os.fstat(out_fd).st_size  # the server created it; it never shrinks (sealed)
        self._out_map = mmap.mmap(out_fd, self._out_size) if self._out_size else None
        self._out_used = 0
        self.out_limit = 1 << 30
        self._send_lock = threading.Lock()
        self._out_lock = threading.Lock()  # decoupled models may send from their own threads
        self._ids = itertools.count(1)
        self._answers = {}
        self._read_lock = threading.Lock()  # BLS calls may come from several of the model's threads

    # Framing.
    def send(self, obj):
        data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
        frame = len(data).to_bytes(4, "little") + data
        with self._send_lock:
            try:
                self._sock.sendall(frame)
            except OSError:
                os._exit(0)  # the server is gone

    def recv(self):
        head = self._sock.recv(4, 0x100)  # MSG_WAITALL
        if len(head) < 4:
            return None
        n = int.from_bytes(head, "little")
        body = self._sock.recv(n, 0x100) if n else b""
        if len(body) < n:
            return None
        return json.loads(body)

    # Shared memory.
    def sync_in(self, size):
        if size > self._in_size:
            self._in_map = mmap.mmap(self._in_fd, size)  # arrays on the old map keep it alive
            self._in_size = size

    def reset_out(self):
        self._out_used = 0

    def out_size(self):
        return self._out_size

    def _reserve(self, n):
        at = (self._out_used + _ALIGN - 1) // _ALIGN * _ALIGN
        need = at + n
        if need > self._out_size:
            size = max(need, 2 * self._out_size)
            if need > self.out_limit:
                raise pb_utils.TritonModelException(
                    "tensors of %d bytes do not fit the worker's shared memory (SHM_LIMIT_BYTES: %d)"
                    % (need, self.out_limit))
            size = min(size, self.out_limit)
            os.ftruncate(self._out_fd, size)
            self._out_map = mmap.mmap(self._out_fd, size)
            self._out_size = size
        self._out_used = need
        return at

    def put(self, tensor):
        """Writes a pb_utils.Tensor into the to-server region; returns its descriptor."""
        with self._out_lock:
            return self._put(tensor)

    def _put(self, tensor):
        arr = tensor.as_numpy()
        if arr.dtype.byteorder == ">":  # the wire is little-endian
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        wire = pb_utils._wire_of_dtype(arr.dtype)
        if wire is None:
            raise pb_utils.TritonModelException("tensor '%s': numpy type %s has no Triton data type"
                                                % (tensor.name(), arr.dtype))
        raw = pb_utils.serialize_byte_tensor(arr) if wire == "BYTES" else np.ascontiguousarray(arr)
        n = int(raw.nbytes)
        at = self._reserve(n)
        if n:
            np.frombuffer(self._out_map, dtype=np.uint8, count=n, offset=at)[:] = raw.reshape(-1).view(np.uint8)
        return {"name": tensor.name(), "datatype": wire, "shape": [int(d) for d in arr.shape], "offset": at,
                "size": n}

    def get(self, desc):
        """A descriptor of the to-worker region -> pb_utils.Tensor viewing it (no copy)."""
        wire, shape, at, n = desc["datatype"], desc["shape"], desc["offset"], desc["size"]
        if at + n > self._in_size:
            raise ProtocolError("tensor '%s' lies outside shared memory" % desc["name"])
        if wire == "BYTES":
            arr = pb_utils.deserialize_bytes_tensor(memoryview(self._in_map)[at:at + n]).reshape(shape)
        else:
            dtype = np.dtype(pb_utils._WIRE_TO_NUMPY[wire])
            arr = np.frombuffer(self._in_map, dtype=dtype, count=n // dtype.itemsize, offset=at).reshape(shape)
        t = pb_utils.Tensor.__new__(pb_utils.Tensor)
        t._name, t._array = desc["name"], arr
        return t

    # Calls to the server.
    def log(self, level, message):
        self.send({"type": "log", "level": level, "message": message})

    def send_response(self, index, response, final):
        """A decoupled model's response to request `index` of the current execute (any thread)."""
        msg = {"type": "response", "request": index, "final": final}
        if response is not None and response.has_error():
            msg["error"] = {"message": response.error().message(), "code": response.error().code()}
        else:
            try:
                msg["outputs"] = [self.put(t) for t in (response.output_tensors() if response is not None else [])]
            except Exception as e:  # noqa: B902
                msg["error"] = {"message": _describe(e, ""), "code": 1}
        msg["out_size"] = self._out_size
        self.send(msg)

    def bls_send(self, request, decoupled=False):
        inputs = [self.put(t) for t in request.inputs()]
        call_id = next(self._ids)
        version = request.model_version()
        self.send({"type": "bls", "id": call_id, "model": request.model_name(),
                   "version": "" if version is None or int(version) < 0 else str(int(version)),
                   "inputs": inputs, "outputs": list(request.requested_output_names()),
                   "request_id": request.request_id(), "parameters": request._parameters,
                   "timeout_us": int(request.timeout() or 0), "decoupled": bool(decoupled),
                   "trace": request._trace._index if request._trace is not None else -1,
                   "out_size": self._out_size})
        return call_id

    def _read_bls_answer(self):
        msg = self.recv()
        if msg is None:
            os._exit(0)
        if msg.get("type") != "bls_result":
            raise ProtocolError("expected a BLS answer, got '%s'" % msg.get("type"))
        self.sync_in(msg["in_size"])
        err = msg.get("error")
        if err:
            resp = pb_utils.InferenceResponse(error=pb_utils.TritonError(err["message"], err.get("code", 0)))
        else:
            resp = pb_utils.InferenceResponse(output_tensors=[self.get(d) for d in msg["outputs"]])
        self._answers.setdefault(msg["id"], []).append((resp, msg.get("final", True)))

    def _await_answer(self, call_id):
        while not self._answers.get(call_id):
            with self._read_lock:
                if not self._answers.get(call_id):
                    self._read_bls_answer()

    def bls_wait(self, call_id):
        self._await_answer(call_id)
        answers = self._answers.pop(call_id)
        return answers[-1][0]

    def bls_stream(self, call_id):
        """A decoupled callee's responses as they come; the last one may be empty (it carries the final flag)."""
        while True:
            self._await_answer(call_id)
            resp, final = self._answers[call_id].pop(0)
            yield resp
            if final:
                self._answers.pop(call_id, None)
                return


def _describe(exc, model_file):
    """"ValueError: why" plus the frames of the user's code (Triton's "At:" list)."""
    if isinstance(exc, SystemExit):
        text = "SystemExit: model.py called sys.exit(%s)" % ("" if exc.code is None else repr(exc.code))
    else:
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<inferd>")]
    if frames:
        text += "\n\nAt:\n" + "\n".join("  %s(%d): %s" % (f.filename, f.lineno, f.name) for f in frames)
    return text


def _watch_server(sock):
    """Exit when the server's end of the socket closes (the server died), even while user code loops."""
    poller = select.poll()
    poller.register(sock.fileno(), getattr(select, "POLLRDHUP", 0x2000))
    while True:
        for _, events in poller.poll():
            if events & (getattr(select, "POLLRDHUP", 0x2000) | select.POLLHUP | select.POLLERR):
                os._exit(0)


def _load_module(model_file):
    import importlib.util
    spec = importlib.util.spec_from_file_location("model", model_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["model"] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "TritonPythonModel"):
        raise pb_utils.TritonModelException("%s defines no class TritonPythonModel" % model_file)
    return module


def _run(result, loop):
    if inspect.iscoroutine(result):
        return loop.run_until_complete(result)
    return result


def _execute(model, msg, ch, loop, model_file):
    ch.sync_in(msg["in_size"])
    ch.reset_out()
    decoupled = bool(msg.get("decoupled"))
    requests = []
    for i, r in enumerate(msg["requests"]):
        req = pb_utils.InferenceRequest(model_name=msg.get("model", ""), inputs=[ch.get(d) for d in r["inputs"]],
                                        requested_output_names=r.get("outputs", []), request_id=r.get("id", ""),
                                        parameters=r.get("parameters") or {})
        req._index, req._decoupled = i, decoupled
        requests.append(req)
    if decoupled:
        try:
            returned = _run(model.execute(requests), loop)
            if returned is not None:
                raise pb_utils.TritonModelException(
                    "execute() of a decoupled model must return None and answer through request.get_response_sender()")
        except BaseException as e:  # noqa: B902
            ch.send({"type": "execute_error", "message": _describe(e, model_file), "out_size": ch.out_size()})
            return
        ch.send({"type": "executed", "out_size": ch.out_size()})
        return
    try:
        responses = _run(model.execute(requests), loop)
        if not isinstance(responses, (list, tuple)) or len(responses) != len(requests):
            raise pb_utils.TritonModelException(
                "execute() must return a list of %d InferenceResponse (one per request), not %s"
                % (len(requests), "a list of %d" % len(responses) if isinstance(responses, (list, tuple))
                   else type(responses).__name__))
    except BaseException as e:  # noqa: B902: sys.exit and KeyboardInterrupt are the user's errors too
        ch.send({"type": "execute_error", "message": _describe(e, model_file), "out_size": ch.out_size()})
        return
    answers = []
    for resp in responses:
        if not isinstance(resp, pb_utils.InferenceResponse):
            answers.append({"error": {"message": "execute() returned %s where an InferenceResponse belongs"
                                                 % type(resp).__name__, "code": 1}})
        elif resp.has_error():
            answers.append({"error": {"message": resp.error().message(), "code": resp.error().code()}})
        else:
            try:
                answers.append({"outputs": [ch.put(t) for t in resp.output_tensors()]})
            except Exception as e:  # noqa: B902
                answers.append({"error": {"message": _describe(e, model_file), "code": 1}})
    ch.send({"type": "responses", "responses": answers, "out_size": ch.out_size()})


def main(sock, in_fd, out_fd):
    ch = Channel(sock, in_fd, out_fd)
    pb_utils._channel = ch
    threading.Thread(target=_watch_server, args=(sock,), daemon=True, name="inferd-watch").start()
    init = ch.recv()
    if init is None:
        return
    ch.out_limit = int(init.get("shm_limit", ch.out_limit))
    version_dir = init["version_dir"]
    if "" in sys.path:
        sys.path.remove("")
    sys.path.insert(0, version_dir)
    model_file = init["model_file"]
    try:
        module = _load_module(model_file)
        if init.get("auto_complete"):
            cls = module.TritonPythonModel
            config = pb_utils.ModelConfig(init["args"]["model_config"])
            if hasattr(cls, "auto_complete_config"):
                config = cls.auto_complete_config(config)
            ch.send({"type": "config", "config": config.as_dict(),
                     "defined": hasattr(cls, "auto_complete_config")})
            return
        model = module.TritonPythonModel()
        loop = asyncio.new_event_loop()
        if hasattr(model, "initialize"):
            _run(model.initialize(init["args"]), loop)
    except BaseException as e:  # noqa: B902
        ch.send({"type": "init_error", "message": _describe(e, model_file)})
        return
    ch.send({"type": "ready", "out_size": ch.out_size()})
    while True:
        msg = ch.recv()
        if msg is None:
            return
        kind = msg.get("type")
        if kind == "execute":
            _execute(model, msg, ch, loop, model_file)
        elif kind == "finalize":
            try:
                if hasattr(model, "finalize"):
                    _run(model.finalize(), loop)
                ch.send({"type": "finalized"})
            except BaseException as e:  # noqa: B902
                ch.send({"type": "finalized", "message": _describe(e, model_file)})
            return
        # A late BLS answer (its execute gave up on it) is dropped.
