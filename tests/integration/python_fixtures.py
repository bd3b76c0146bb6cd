"""Python-backend models (Triton's model.py API) for the integration tests.

make(repo): models every suite's server loads (Triton's example models: add/sub, BLS, strings; and the
three-step ensemble python preprocess -> TorchScript mlp -> output rules).
make_isolated(repo): models that misbehave on purpose or fail to load, for the Python suite's own servers.
"""
import os
import textwrap


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text).lstrip())


def _model(repo, name, config, code, version=1):
    _write(os.path.join(repo, name, "config.pbtxt"), config)
    _write(os.path.join(repo, name, str(version), "model.py"), code)


# Written like Triton's examples/add_sub/model.py: the config read from args, dtypes from
# triton_string_to_numpy, one response per request.
ADD_SUB = """
    import json

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.model_config = model_config = json.loads(args["model_config"])
            self.name = args["model_name"] + "/" + args["model_version"] + "/" + args["model_instance_name"]
            out0 = pb_utils.get_output_config_by_name(model_config, "OUTPUT0")
            out1 = pb_utils.get_output_config_by_name(model_config, "OUTPUT1")
            self.output0_dtype = pb_utils.triton_string_to_numpy(out0["data_type"])
            self.output1_dtype = pb_utils.triton_string_to_numpy(out1["data_type"])
            pb_utils.Logger.log_info("initialized " + self.name)

        def execute(self, requests):
            responses = []
            for request in requests:
                in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
                in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1")
                out_0 = in_0.as_numpy() + in_1.as_numpy()
                out_1 = in_0.as_numpy() - in_1.as_numpy()
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("OUTPUT0", out_0.astype(self.output0_dtype)),
                    pb_utils.Tensor("OUTPUT1", out_1.astype(self.output1_dtype))]))
            return responses

        def finalize(self):
            pb_utils.Logger.log_info("finalized " + self.name)
    """

ADD_SUB_CONFIG = """
        name: "py_add_sub"
        backend: "python"
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                 { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
    """

# BLS as in Triton's examples/bls: calls another model from execute(), sync and async.
BLS = """
    import asyncio

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        async def execute(self, requests):
            responses = []
            for request in requests:
                in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
                in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1")
                # As Triton's BLS example: the called model's name from a BYTES input (numpy gives bytes),
                # the request's own input tensors passed on as they are.
                model = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
                call = pb_utils.InferenceRequest(
                    model_name=model, requested_output_names=["OUTPUT0", "OUTPUT1"], inputs=[in_0, in_1],
                    preferred_memory=pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0))
                sync = call.exec()
                if sync.has_error():
                    responses.append(pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("BLS call failed: " + sync.error().message())))
                    continue
                # Two calls in flight at once, then their answers.
                first, second = await asyncio.gather(call.async_exec(), call.async_exec())
                total = pb_utils.get_output_tensor_by_name(sync, "OUTPUT0").as_numpy()
                diff = pb_utils.get_output_tensor_by_name(first, "OUTPUT1").as_numpy()
                again = pb_utils.get_output_tensor_by_name(second, "OUTPUT0").as_numpy()
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("SUM", total), pb_utils.Tensor("DIFF", diff),
                    pb_utils.Tensor("SAME", np.array([bool(np.array_equal(total, again))]))]))
            return responses
    """

STRINGS = """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
                upper = np.array([s.decode("utf-8").upper().encode("utf-8") for s in text.reshape(-1)],
                                 dtype=np.object_).reshape(text.shape)
                lengths = np.array([len(s) for s in text.reshape(-1)], dtype=np.int32).reshape(text.shape)
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("UPPER", upper), pb_utils.Tensor("LENGTH", lengths)]))
            return responses
    """

# Parses CSV lines (BYTES) into standardised features for the mlp.
PREPROCESS = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    MEAN = np.linspace(-0.5, 0.5, 8).astype(np.float32)
    SCALE = np.linspace(0.5, 2.0, 8).astype(np.float32)


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                lines = pb_utils.get_input_tensor_by_name(request, "csv").as_numpy().reshape(-1)
                rows = np.array([[float(v) for v in line.decode().split(",")] for line in lines], dtype=np.float32)
                if rows.shape[1:] != (8,):
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                        "each line needs 8 comma-separated numbers", pb_utils.TritonError.INVALID_ARG)))
                    continue
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("features", (rows - MEAN) / SCALE)]))
            return responses
    """

# Decoupled, like Triton's examples/decoupled repeat model: one response per element of IN, sent from a thread
# after execute() returned, then the final flag alone.
REPEAT = """
    import json
    import threading

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            if not pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"])):
                raise pb_utils.TritonModelException("this model needs model_transaction_policy { decoupled: true }")

        def execute(self, requests):
            for request in requests:
                values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                threading.Thread(target=self.answer, args=(request.get_response_sender(), values)).start()
            return None

        def answer(self, sender, values):
            for i, v in enumerate(values):
                if v < 0:
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative value at %d" % i)),
                                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                    return
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([v], np.int32)),
                                                        pb_utils.Tensor("IDX", np.array([i], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    """

# BLS into the decoupled model from `async def execute`, as Triton's bls_decoupled async example: two calls in
# flight at once (asyncio.gather of async_exec(decoupled=True)), then each one's responses iterated; answers the
# sums of IN and of IN + 1 and how many responses carried outputs.
BLS_REPEAT_ASYNC = """
    import asyncio

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        async def execute(self, requests):
            responses = []
            for request in requests:
                values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                calls = [pb_utils.InferenceRequest(model_name="py_repeat", requested_output_names=["OUT"],
                                                   inputs=[pb_utils.Tensor("IN", (values + k).astype(np.int32))])
                         for k in (0, 1)]
                streams = await asyncio.gather(*[c.async_exec(decoupled=True) for c in calls])
                sums, count, error = [], 0, None
                for stream in streams:
                    total = 0
                    for resp in stream:  # read to the end, the error response included
                        if resp.has_error():
                            error = error or resp.error().message()
                        elif resp.output_tensors():
                            total += int(pb_utils.get_output_tensor_by_name(resp, "OUT").as_numpy()[0])
                            count += 1
                    sums.append(total)
                if error:
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("repeat failed: " + error)))
                    continue
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUMS", np.array(sums, np.int64)),
                                                             pb_utils.Tensor("COUNT", np.array([count], np.int64))]))
            return responses
    """

# BLS into the decoupled model: iterates over its responses and sums them.
BLS_REPEAT = """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                call = pb_utils.InferenceRequest(model_name="py_repeat", requested_output_names=["OUT"],
                                                 inputs=[pb_utils.Tensor("IN", values)])
                total, count, error = 0, 0, None
                for resp in call.exec(decoupled=True):
                    if resp.has_error():
                        error = resp.error().message()
                        break
                    if resp.output_tensors():
                        total += int(pb_utils.get_output_tensor_by_name(resp, "OUT").as_numpy()[0])
                        count += 1
                if error:
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("repeat failed: " + error)))
                    continue
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", np.array([total], np.int64)),
                                                             pb_utils.Tensor("COUNT", np.array([count], np.int64))]))
            return responses
    """


def make(repo):
    _model(repo, "py_add_sub", ADD_SUB_CONFIG + """
        instance_group [ { kind: KIND_CPU count: 2 } ]
        """, ADD_SUB)
    _model(repo, "py_bls", """
        name: "py_bls"
        backend: "python"
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] },
                { name: "MODEL_NAME" data_type: TYPE_STRING dims: [ 1 ] } ]
        output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] },
                 { name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] },
                 { name: "SAME" data_type: TYPE_BOOL dims: [ 1 ] } ]
        """, BLS)
    _model(repo, "py_strings", """
        name: "py_strings"
        backend: "python"
        max_batch_size: 8
        dynamic_batching { }
        input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]
        output [ { name: "UPPER" data_type: TYPE_STRING dims: [ -1 ] },
                 { name: "LENGTH" data_type: TYPE_INT32 dims: [ -1 ] } ]
        """, STRINGS)
    _model(repo, "py_preprocess", """
        name: "py_preprocess"
        backend: "python"
        max_batch_size: 16
        dynamic_batching { }
        input [ { name: "csv" data_type: TYPE_STRING dims: [ 1 ] } ]
        output [ { name: "features" data_type: TYPE_FP32 dims: [ 8 ] } ]
        """, PREPROCESS)
    _model(repo, "py_repeat", """
        name: "py_repeat"
        backend: "python"
        model_transaction_policy { decoupled: true }
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
        output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "IDX" data_type: TYPE_INT32 dims: [ 1 ] } ]
        """, REPEAT)
    _model(repo, "py_bls_repeat_async", """
        name: "py_bls_repeat_async"
        backend: "python"
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
        output [ { name: "SUMS" data_type: TYPE_INT64 dims: [ 2 ] }, { name: "COUNT" data_type: TYPE_INT64 dims: [ 1 ] } ]
        """, BLS_REPEAT_ASYNC)
    _model(repo, "py_bls_repeat", """
        name: "py_bls_repeat"
        backend: "python"
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
        output [ { name: "SUM" data_type: TYPE_INT64 dims: [ 1 ] }, { name: "COUNT" data_type: TYPE_INT64 dims: [ 1 ] } ]
        """, BLS_REPEAT)
    # Three steps: Python preprocessing -> the TorchScript mlp -> rules on the answer.
    _write(os.path.join(repo, "pipe_three", "config.pbtxt"), """
        name: "pipe_three"
        platform: "ensemble"
        max_batch_size: 16
        input [ { name: "csv" data_type: TYPE_STRING dims: [ 1 ] } ]
        output [ { name: "logits" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "labels.txt" } ]
        ensemble_scheduling {
          step [ { model_name: "py_preprocess" model_version: -1
                   input_map { key: "csv" value: "csv" } output_map { key: "features" value: "features" } },
                 { model_name: "mlp" model_version: -1
                   input_map { key: "x" value: "features" } output_map { key: "y" value: "logits" } } ]
        }
        parameters { key: "rule:label" value: { string_value: "logits | softmax | argmax | threshold 0.6 others | label" } }
        parameters { key: "rule:confidence" value: { string_value: "logits | softmax | argmax | score" } }
        """)
    _write(os.path.join(repo, "pipe_three", "labels.txt"), "cat\ndog\nbird\n")
    os.makedirs(os.path.join(repo, "pipe_three", "1"), exist_ok=True)


CHAOS = """
    import json
    import os
    import sys

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.pid = os.getpid()

        def execute(self, requests):
            responses = []
            for request in requests:
                mode = json.loads(request.parameters()).get("mode", "ok")
                x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
                if mode == "raise":
                    raise ValueError("asked to raise")
                if mode == "exit":
                    sys.exit(3)
                if mode == "segfault":
                    os.kill(os.getpid(), 11)
                if mode == "hang":
                    while True:
                        pass
                if mode == "error":
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("this request is refused")))
                    continue
                if mode == "wrong_dtype":
                    responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x.astype("float64"))]))
                    continue
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("Y", x * 2), pb_utils.Tensor("PID", [[self.pid]] * x.shape[0])]))
            return responses
    """

AUTO_COMPLETE = """
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(auto_complete_model_config):
            auto_complete_model_config.add_input({"name": "IN", "data_type": "TYPE_INT32", "dims": [3]})
            auto_complete_model_config.add_output({"name": "OUT", "data_type": "TYPE_INT32", "dims": [3]})
            auto_complete_model_config.set_max_batch_size(4)
            auto_complete_model_config.set_dynamic_batching()
            return auto_complete_model_config

        def execute(self, requests):
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN")
                                                                .as_numpy() * 10)]) for r in requests]
    """

INIT_FAILS = """
    class TritonPythonModel:
        def initialize(self, args):
            raise RuntimeError("cannot find my weights")

        def execute(self, requests):
            return []
    """

NO_CLASS = """
    def execute(requests):
        return []
    """


def make_isolated(repo):
    _model(repo, "py_chaos", """
        name: "py_chaos"
        backend: "python"
        max_batch_size: 8
        dynamic_batching { max_queue_delay_microseconds: 200000 preferred_batch_size: [ 2 ] }
        input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "PID" data_type: TYPE_INT64 dims: [ 1 ] } ]
        parameters { key: "EXECUTE_TIMEOUT_SECONDS" value: { string_value: "2" } }
        """, CHAOS)
    _model(repo, "py_add_sub", ADD_SUB_CONFIG, ADD_SUB)
    _model(repo, "py_auto", 'backend: "python"\n', AUTO_COMPLETE)
    _model(repo, "py_init_fails", 'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
           'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n', INIT_FAILS)
    _write(os.path.join(repo, "identity_decoupled", "config.pbtxt"), """
        backend: "identity"
        model_transaction_policy { decoupled: true }
        input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
        """)
    os.makedirs(os.path.join(repo, "identity_decoupled", "1"), exist_ok=True)
    _model(repo, "py_no_class", 'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
           'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n', NO_CLASS)
