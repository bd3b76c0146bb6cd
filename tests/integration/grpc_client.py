"""A KServe v2 gRPC test client: Debian's python3-grpcio with stubs that
protoc generates from the project's own .proto files at test time, so the
tests speak exactly the wire format a Triton or KServe client library does.
"""
import importlib
import os
import subprocess
import sys

import numpy as np

import inferd_client as ic

PROTOS = ("model_config.proto", "grpc_service.proto", "health.proto", "inferd_management.proto")
PLUGIN = "/usr/bin/grpc_python_plugin"  # Debian protobuf-compiler-grpc

# The typed contents field each datatype travels in.
CONTENTS = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
    "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
    "UINT64": "uint64_contents", "FP16": "fp32_contents", "FP32": "fp32_contents", "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}


class Stubs:
    """Generates and imports the message and service modules."""

    def __init__(self, root, out_dir):
        os.makedirs(out_dir, exist_ok=True)
        proto_dir = os.path.join(root, "proto")
        subprocess.check_call(["protoc", "-I", proto_dir, "--python_out", out_dir, "--grpc_python_out", out_dir,
                               "--plugin=protoc-gen-grpc_python=" + PLUGIN,
                               *[os.path.join(proto_dir, p) for p in PROTOS]])
        if out_dir not in sys.path:
            sys.path.insert(0, out_dir)
        self.pb = importlib.import_module("grpc_service_pb2")
        self.pb_grpc = importlib.import_module("grpc_service_pb2_grpc")
        self.health = importlib.import_module("health_pb2")
        self.health_grpc = importlib.import_module("health_pb2_grpc")
        self.config = importlib.import_module("model_config_pb2")
        self.management = importlib.import_module("inferd_management_pb2")
        self.management_grpc = importlib.import_module("inferd_management_pb2_grpc")


def bytes_tensor(elements):
    """BYTES elements (bytes) -> the raw layout: 4-byte little-endian length + bytes each."""
    return b"".join(len(e).to_bytes(4, "little") + e for e in elements)


def split_bytes(raw):
    out, i = [], 0
    while i < len(raw):
        n = int.from_bytes(raw[i:i + 4], "little")
        out.append(raw[i + 4:i + 4 + n])
        i += 4 + n
    return out


def infer_request(pb, model, inputs, raw=True, id="", outputs=None, version="", params=None):
    """inputs: {name: ndarray, or (shape, [bytes...]) for BYTES}."""
    req = pb.ModelInferRequest(model_name=model, model_version=version, id=id)
    for name, a in inputs.items():
        t = req.inputs.add()
        t.name = name
        if isinstance(a, tuple):
            shape, elements = a
            t.datatype = "BYTES"
            t.shape.extend(shape)
            if raw:
                req.raw_input_contents.append(bytes_tensor(elements))
            else:
                t.contents.bytes_contents.extend(elements)
            continue
        t.datatype = ic.wire_type(a)
        t.shape.extend(a.shape)
        if raw:
            req.raw_input_contents.append(np.ascontiguousarray(a).tobytes())
        else:
            values = a.flatten().tolist()
            getattr(t.contents, CONTENTS[t.datatype]).extend(values)
    for o in outputs or []:
        req.outputs.add().name = o
    for k, v in (params or {}).items():
        p = req.parameters[k]
        if isinstance(v, bool):
            p.bool_param = v
        elif isinstance(v, int):
            p.int64_param = v
        elif isinstance(v, float):
            p.double_param = v
        else:
            p.string_param = v
    return req


def outputs_of(resp):
    """{name: ndarray (or list of bytes for BYTES)} from raw_output_contents or typed contents."""
    out = {}
    for i, o in enumerate(resp.outputs):
        shape = tuple(o.shape)
        if resp.raw_output_contents:
            raw = resp.raw_output_contents[i]
            if o.datatype == "BYTES":
                out[o.name] = split_bytes(raw)
            else:
                out[o.name] = np.frombuffer(raw, ic.WIRE[o.datatype]).reshape(shape)
        else:
            values = list(getattr(o.contents, CONTENTS[o.datatype]))
            if o.datatype == "BYTES":
                out[o.name] = values
            else:
                out[o.name] = np.array(values, ic.WIRE[o.datatype]).reshape(shape)
    return out
