#!/usr/bin/python3
"""Unit tests of inferd's triton_python_backend_utils (the parts that need no server)."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton_python_backend_utils as pb_utils  # noqa: E402


class PbUtils(unittest.TestCase):
    def test_bytes_tensors_round_trip_in_tritons_layout(self):
        arr = np.array([b"ab", "\u00e9".encode(), b""], dtype=np.object_)
        raw = pb_utils.serialize_byte_tensor(arr)
        self.assertEqual(raw.tobytes(), b"\x02\x00\x00\x00ab\x02\x00\x00\x00\xc3\xa9\x00\x00\x00\x00")
        self.assertEqual(list(pb_utils.deserialize_bytes_tensor(raw.tobytes())), [b"ab", "\u00e9".encode(), b""])
        with self.assertRaises(pb_utils.TritonModelException):
            pb_utils.deserialize_bytes_tensor(b"\x05\x00\x00\x00ab")

    def test_datatype_conversions(self):
        self.assertIs(pb_utils.triton_string_to_numpy("TYPE_FP32"), np.float32)
        self.assertIs(pb_utils.triton_string_to_numpy("TYPE_STRING"), np.object_)
        self.assertIs(pb_utils.triton_to_numpy_type(13), np.object_)
        self.assertEqual(pb_utils.numpy_to_triton_type(np.float32), 11)
        self.assertEqual(pb_utils.numpy_to_triton_type(np.bytes_), 13)
        self.assertIsNone(pb_utils.numpy_to_triton_type(np.complex64))
        self.assertEqual(pb_utils.Tensor("s", np.array(["x", "y"])).triton_dtype(), 13)
        with self.assertRaises(pb_utils.TritonModelException):
            pb_utils.Tensor("c", np.zeros(2, np.complex64))

    def test_model_config_follows_tritons_rules(self):
        cfg = pb_utils.ModelConfig('{"name": "m", "max_batch_size": 0, "input": [], "output": '
                                   '[{"name": "OUT", "data_type": "TYPE_FP32", "dims": [3]}]}')
        cfg.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [3], "optional": False})
        cfg.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [3]})  # the same: fine
        with self.assertRaises(ValueError):
            cfg.add_output({"name": "OUT", "data_type": "TYPE_INT32", "dims": [3]})
        with self.assertRaises(ValueError):
            cfg.add_input({"name": "X", "data_type": "TYPE_FP32"})
        with self.assertRaises(ValueError):
            cfg.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "format": "NCHW"})
        cfg.set_max_batch_size(8)
        cfg.set_dynamic_batching()
        cfg.set_model_transaction_policy({"decoupled": True})
        with self.assertRaises(ValueError):
            cfg.set_max_batch_size(4)  # lower than what is set
        d = cfg.as_dict()
        self.assertEqual((d["max_batch_size"], d["dynamic_batching"], d["model_transaction_policy"]),
                         (8, {}, {"decoupled": True}))
        self.assertTrue(pb_utils.using_decoupled_model_transaction_policy(d))

    def test_requests_accept_bytes_names_and_senders_need_decoupled_models(self):
        req = pb_utils.InferenceRequest(model_name=np.array([b"add_sub"], np.object_)[0], inputs=[],
                                        requested_output_names=[b"OUT"], parameters={"k": 1})
        self.assertEqual((req.model_name(), req.requested_output_names()), ("add_sub", ["OUT"]))
        self.assertEqual(req.parameters(), '{"k": 1}')
        with self.assertRaises(pb_utils.TritonModelException):
            req.get_response_sender().send(pb_utils.InferenceResponse([]))
        with self.assertRaises(pb_utils.TritonModelException):
            req.exec()  # no server in this process

    def test_a_bls_request_takes_its_callers_trace(self):
        caller = pb_utils.InferenceRequest(model_name="m")
        caller._index = 3  # the worker numbers the requests execute() gets
        call = pb_utils.InferenceRequest(model_name="other", trace=caller.trace())
        self.assertEqual(call._trace._index, 3)
        self.assertIsNone(pb_utils.InferenceRequest(model_name="other")._trace)
        with self.assertRaises(pb_utils.TritonModelException):
            pb_utils.InferenceRequest(model_name="other", trace="not a trace")

    def test_responses_check_their_arguments(self):
        with self.assertRaises(pb_utils.TritonModelException):
            pb_utils.InferenceResponse(output_tensors=[np.zeros(2)])
        err = pb_utils.InferenceResponse(error=pb_utils.TritonError("bad", pb_utils.TritonError.INVALID_ARG))
        self.assertTrue(err.has_error())
        self.assertEqual((err.error().message(), err.error().code()), ("bad", 3))


if __name__ == "__main__":
    unittest.main()
