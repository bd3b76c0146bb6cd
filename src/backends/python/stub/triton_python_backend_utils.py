"""inferd's implementation of Triton's `triton_python_backend_utils` module.

model.py files written for Triton's Python backend import this module as
`pb_utils`; inferd's worker process (inferd_python_worker.py) installs it in
sys.modules before it imports model.py. The names, signatures and behaviour
follow Triton's Python backend API; docs/python_backend.md lists the
differences.
"""
import json

import numpy as np

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

# The worker's connection to the server (set by inferd_python_worker).
_channel = None

# TRITONSERVER_DataType values, as Triton numbers them.
_WIRE_TO_ENUM = {"BOOL": 1, "UINT8": 2, "UINT16": 3, "UINT32": 4, "UINT64": 5, "INT8": 6, "INT16": 7,
                 "INT32": 8, "INT64": 9, "FP16": 10, "FP32": 11, "FP64": 12, "BYTES": 13, "BF16": 14}
_ENUM_TO_WIRE = {v: k for k, v in _WIRE_TO_ENUM.items()}
_WIRE_TO_NUMPY = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
                  "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
                  "FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "BYTES": np.object_}


def triton_string_to_numpy(triton_type_string):
    """"TYPE_FP32" -> numpy.float32 (the config's data_type)."""
    name = triton_type_string[5:] if triton_type_string.startswith("TYPE_") else triton_type_string
    if name == "STRING":
        name = "BYTES"
    if name not in _WIRE_TO_NUMPY:
        raise TritonModelException("unknown data type '%s'" % triton_type_string)
    return _WIRE_TO_NUMPY[name]


def triton_to_numpy_type(data_type):
    """A TRITONSERVER_DataType number -> its numpy type."""
    wire = _ENUM_TO_WIRE.get(data_type)
    if wire is None or wire == "BF16":
        return None
    return _WIRE_TO_NUMPY[wire]  # 13 (BYTES): numpy.object_


_DTYPE_TO_WIRE = {np.dtype(t): w for w, t in _WIRE_TO_NUMPY.items() if w != "BYTES"}


def _wire_of_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in ("O", "S", "U"):
        return "BYTES"
    return _DTYPE_TO_WIRE.get(dtype.newbyteorder("=") if dtype.byteorder == ">" else dtype)


def numpy_to_triton_type(data_type):
    """A numpy type -> its TRITONSERVER_DataType number (None when there is none)."""
    wire = _wire_of_dtype(data_type)
    return None if wire is None else _WIRE_TO_ENUM[wire]


def serialize_byte_tensor(input_tensor):
    """An array of bytes/str objects -> uint8 array of 4-byte-length-prefixed elements (Triton's layout)."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.uint8)
    parts = []
    for obj in np.nditer(input_tensor, flags=["refs_ok"], order="C"):
        item = obj.item()
        if isinstance(item, str):
            item = item.encode("utf-8")
        elif not isinstance(item, (bytes, bytearray)):
            item = str(item).encode("utf-8")
        parts.append(len(item).to_bytes(4, "little"))
        parts.append(bytes(item))
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor):
    """Triton's BYTES layout -> a flat object array of bytes."""
    buf = memoryview(encoded_tensor).cast("B") if not isinstance(encoded_tensor, (bytes, bytearray)) \
        else memoryview(encoded_tensor)
    out, at, n = [], 0, len(buf)
    while at < n:
        if at + 4 > n:
            raise TritonModelException("BYTES tensor truncated")
        size = int.from_bytes(buf[at:at + 4], "little")
        at += 4
        if at + size > n:
            raise TritonModelException("BYTES tensor truncated")
        out.append(bytes(buf[at:at + size]))
        at += size
    return np.array(out, dtype=np.object_)


class TritonError:
    """An error for one response: InferenceResponse(error=TritonError("why"))."""
    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message, code=0):
        self._message = str(message)
        self._code = code

    def message(self):
        return self._message

    def code(self):
        return self._code

    def __repr__(self):
        return "TritonError(%r)" % self._message


class TritonModelException(Exception):
    """Raised by pb_utils on misuse; user code may raise it too."""

    def message(self):
        return str(self.args[0]) if self.args else ""


class _DLPackCapsule:
    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


class Tensor:
    """A named tensor: Tensor("OUTPUT0", numpy_array)."""

    def __init__(self, name, data, dtype=None):
        if not isinstance(name, str):
            raise TritonModelException("a tensor's name must be a string")
        if not isinstance(data, np.ndarray):
            data = np.asarray(data)
        if dtype is not None:
            data = data.astype(dtype)
        if data.dtype.kind in ("S", "U"):
            data = data.astype(np.object_)
        if _wire_of_dtype(data.dtype) is None:
            raise TritonModelException("tensor '%s': numpy type %s has no Triton data type" % (name, data.dtype))
        self._name = name
        self._array = data

    def name(self):
        return self._name

    def as_numpy(self):
        return self._array

    def shape(self):
        return list(self._array.shape)

    def triton_dtype(self):
        return _WIRE_TO_ENUM[_wire_of_dtype(self._array.dtype)]

    def data_type(self):
        return self.triton_dtype()

    def is_cpu(self):
        return True

    def to_dlpack(self):
        return np.ascontiguousarray(self._array).__dlpack__()

    def __dlpack__(self, stream=None):
        return self.to_dlpack()

    def __dlpack_device__(self):
        return (1, 0)

    @staticmethod
    def from_dlpack(name, capsule):
        holder = capsule if hasattr(capsule, "__dlpack__") else _DLPackCapsule(capsule)
        return Tensor(name, np.from_dlpack(holder))

    def __repr__(self):
        return "Tensor(%r, shape=%s, dtype=%s)" % (self._name, list(self._array.shape), self._array.dtype)


class InferenceResponse:
    """The answer to one request: output tensors, or an error."""

    def __init__(self, output_tensors=None, error=None, parameters=None):
        self._outputs = list(output_tensors or [])
        for t in self._outputs:
            if not isinstance(t, Tensor):
                raise TritonModelException("output_tensors must be pb_utils.Tensor objects, not %s" % type(t).__name__)
        if error is not None and not isinstance(error, TritonError):
            error = TritonError(str(error))
        self._error = error
        if isinstance(parameters, dict):
            parameters = json.dumps(parameters)
        self._parameters = parameters or "{}"

    def output_tensors(self):
        return self._outputs

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def parameters(self):
        return self._parameters


class InferenceResponseSender:
    """A decoupled model's way to answer (request.get_response_sender()): send(response, flags) zero or more
    times, the last call with flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL (response may then be None)."""

    def __init__(self, request):
        self._request = request
        self._closed = False

    def send(self, response=None, flags=0):
        if not self._request._decoupled:
            raise TritonModelException("only decoupled models (model_transaction_policy { decoupled: true }) "
                                       "answer through a response sender; return the responses from execute()")
        if self._closed:
            raise TritonModelException("this request's final response was already sent")
        final = bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        if response is None and not final:
            raise TritonModelException("send() needs a response or flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL")
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException("send() takes an InferenceResponse, not %s" % type(response).__name__)
        if final:
            self._closed = True
        _channel.send_response(self._request._index, response, final)

    def close(self):
        """Older Triton's way to say no more responses will come (send(flags=FINAL))."""
        self.send(flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def is_cancelled(self):
        return False


class InferenceTrace:
    """A request's trace (request.trace()): passed to a BLS InferenceRequest(trace=...), the called model's spans
    become children of this request's (tracing on: docs/observability.md)."""

    def __init__(self, index):
        self._index = index


class InferenceRequest:
    """A request: the ones execute() receives, and BLS requests to other models
    (InferenceRequest(model_name=..., inputs=[...], requested_output_names=[...]).exec())."""

    def __init__(self, model_name=None, inputs=None, requested_output_names=None, request_id="", correlation_id=0,
                 model_version=-1, flags=0, timeout=0, preferred_memory=None, trace=None, parameters=None):
        model_name = model_name or ""
        self._model_name = model_name.decode("utf-8") if isinstance(model_name, (bytes, np.bytes_)) else str(model_name)
        self._inputs = list(inputs or [])
        self._requested = [n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in requested_output_names or []]
        self._request_id = request_id.decode("utf-8") if isinstance(request_id, bytes) else str(request_id or "")
        self._correlation_id = correlation_id
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        if parameters is None:
            parameters = {}
        if isinstance(parameters, str):
            parameters = json.loads(parameters)
        if not isinstance(parameters, dict):
            raise TritonModelException("parameters must be a dict or a JSON object string")
        self._parameters = parameters
        if trace is not None and not isinstance(trace, InferenceTrace):
            raise TritonModelException("trace must be a request's trace() (pb_utils.InferenceTrace)")
        self._trace = trace
        self._index = 0  # set by the worker for the requests execute() receives
        self._decoupled = False
        self._sender = None

    def inputs(self):
        return self._inputs

    def requested_output_names(self):
        return self._requested

    def request_id(self):
        return self._request_id

    def correlation_id(self):
        return self._correlation_id

    def flags(self):
        return self._flags

    def model_name(self):
        return self._model_name

    def model_version(self):
        return self._model_version

    def timeout(self):
        return self._timeout

    def parameters(self):
        return json.dumps(self._parameters)

    def is_cancelled(self):
        return False

    def trace(self):
        """This request's trace, for the BLS requests it makes (InferenceRequest(..., trace=request.trace()))."""
        return InferenceTrace(self._index)

    def set_release_flags(self, flags):
        pass

    def get_response_sender(self):
        if self._sender is None:
            self._sender = InferenceResponseSender(self)
        return self._sender

    def exec(self, decoupled=False):
        """The called model's response; with decoupled=True an iterator over its responses (the last one
        may be empty: it only says there are no more)."""
        if _channel is None:
            raise TritonModelException("BLS needs the inferd server")
        call_id = _channel.bls_send(self, decoupled)
        if decoupled:
            return _channel.bls_stream(call_id)
        return _channel.bls_wait(call_id)

    def stream_exec(self):
        """Older Triton's name for exec(decoupled=True); the empty last response is left out."""
        for resp in self.exec(decoupled=True):
            if resp.has_error() or resp.output_tensors():
                yield resp

    def async_exec(self, decoupled=False):
        """exec() for `async def execute`: the call is sent at once; awaiting the result gives the called model's
        response, or with decoupled=True the iterator over its responses (as exec(decoupled=True) returns it;
        Triton's bls_decoupled async example: `for r in await request.async_exec(decoupled=True)`). Several
        calls may be in flight together (asyncio.gather)."""
        if _channel is None:
            raise TritonModelException("BLS needs the inferd server")
        return _BlsFuture(_channel.bls_send(self, decoupled), decoupled)


class _BlsFuture:
    """What async_exec returns: the request is already on its way; awaiting waits for its answer (or, for a
    decoupled call, gives the iterator that waits for each response in turn)."""

    def __init__(self, call_id, decoupled=False):
        self._id = call_id
        self._decoupled = decoupled

    def __await__(self):
        if self._decoupled:
            return _channel.bls_stream(self._id)
        return _channel.bls_wait(self._id)
        yield  # noqa: unreachable: makes __await__ a generator


def get_input_tensor_by_name(inference_request, name):
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response, name):
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


def get_input_config_by_name(model_config, name):
    for cfg in model_config.get("input", []):
        if cfg.get("name") == name:
            return cfg
    return None


def get_output_config_by_name(model_config, name):
    for cfg in model_config.get("output", []):
        if cfg.get("name") == name:
            return cfg
    return None


def using_decoupled_model_transaction_policy(model_config):
    """True when the config says model_transaction_policy { decoupled: true }."""
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


TRITONSERVER_MEMORY_CPU = 0
TRITONSERVER_MEMORY_CPU_PINNED = 1
TRITONSERVER_MEMORY_GPU = 2


class PreferredMemory:
    """Where BLS outputs should live (InferenceRequest(..., preferred_memory=...)): inferd's are always CPU."""

    def __init__(self, preferred_memory_type, preferred_device_id=0):
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


class Metric:
    """One labelled series of a MetricFamily. inferd keeps its value in the worker (not exported yet)."""

    def __init__(self, family, labels):
        self._family = family
        self._labels = dict(labels or {})
        self._value = 0.0
        self._sum, self._count = 0.0, 0

    def increment(self, value):
        if self._family.kind == MetricFamily.COUNTER and value < 0:
            raise TritonModelException("a counter only goes up")
        self._value += value

    def set(self, value):
        if self._family.kind == MetricFamily.COUNTER:
            raise TritonModelException("set() is for gauges")
        self._value = value

    def observe(self, value):
        self._sum += value
        self._count += 1

    def value(self):
        return self._value


class MetricFamily:
    """Triton's custom metrics API; values stay in the worker (inferd does not export them yet)."""
    COUNTER, GAUGE, HISTOGRAM = 0, 1, 2

    def __init__(self, name, description, kind):
        self.name, self.description, self.kind = name, description, kind

    def Metric(self, labels=None, buckets=None):  # noqa: N802 (Triton's name)
        return Metric(self, labels)


class Logger:
    """pb_utils.Logger.log_info("...") etc.: lines in the server's log."""
    INFO, WARNING, ERROR, VERBOSE = 0, 1, 2, 3

    @staticmethod
    def log(message, level=0):
        name = {0: "info", 1: "warn", 2: "error", 3: "verbose"}.get(level, "info")
        if _channel is not None:
            _channel.log(name, str(message))

    @staticmethod
    def log_info(message):
        Logger.log(message, Logger.INFO)

    @staticmethod
    def log_warn(message):
        Logger.log(message, Logger.WARNING)

    @staticmethod
    def log_error(message):
        Logger.log(message, Logger.ERROR)

    @staticmethod
    def log_verbose(message):
        Logger.log(message, Logger.VERBOSE)


class ModelConfig:
    """What auto_complete_config receives and returns. Misuse raises ValueError, as in Triton."""

    def __init__(self, model_config):
        self._config = json.loads(model_config) if isinstance(model_config, str) else dict(model_config)
        self._config.setdefault("input", [])
        self._config.setdefault("output", [])
        self._config.setdefault("max_batch_size", 0)

    def as_dict(self):
        return self._config

    def max_batch_size(self):
        return int(self._config.get("max_batch_size", 0))

    def set_max_batch_size(self, max_batch_size):
        if self.max_batch_size() > int(max_batch_size):
            raise ValueError("config.pbtxt of model '%s' sets max_batch_size %d, more than auto_complete_config's %d"
                             % (self._config.get("name", ""), self.max_batch_size(), int(max_batch_size)))
        self._config["max_batch_size"] = int(max_batch_size)

    def set_dynamic_batching(self):
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._config:
                raise ValueError("model '%s' already uses %s" % (self._config.get("name", ""), other))
        self._config.setdefault("dynamic_batching", {})

    def _add(self, key, tensor, allowed):
        if not isinstance(tensor, dict):
            raise ValueError("%s must be a dict" % key)
        for prop in tensor:
            if prop not in allowed:
                raise ValueError("%s '%s' has property '%s' (allowed: %s)"
                                 % (key, tensor.get("name", ""), prop, ", ".join(allowed)))
        for field in ("name", "data_type", "dims"):
            if field not in tensor:
                raise ValueError("%s '%s' is missing '%s'" % (key, tensor.get("name", ""), field))
        for existing in self._config[key]:
            if existing.get("name") != tensor["name"]:
                continue
            if existing.get("data_type", "TYPE_INVALID") not in ("TYPE_INVALID", tensor["data_type"]):
                raise ValueError("%s '%s': config.pbtxt says %s, the model %s"
                                 % (key, tensor["name"], existing["data_type"], tensor["data_type"]))
            if existing.get("dims") and [int(d) for d in existing["dims"]] != [int(d) for d in tensor["dims"]]:
                raise ValueError("%s '%s': config.pbtxt says dims %s, the model %s"
                                 % (key, tensor["name"], existing["dims"], tensor["dims"]))
            existing.update(tensor)
            return
        self._config[key].append(dict(tensor))

    def add_input(self, input):  # noqa: A002 (Triton's parameter name)
        self._add("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output):
        self._add("output", output, ("name", "data_type", "dims"))

    def set_model_transaction_policy(self, transaction_policy_dict):
        for prop in transaction_policy_dict:
            if prop != "decoupled":
                raise ValueError("model_transaction_policy has only 'decoupled', not '%s'" % prop)
        policy = self._config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            if "decoupled" in policy and bool(policy["decoupled"]) != bool(transaction_policy_dict["decoupled"]):
                raise ValueError("config.pbtxt already sets decoupled to %s" % policy["decoupled"])
            policy["decoupled"] = bool(transaction_policy_dict["decoupled"])
