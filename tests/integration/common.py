"""Shared state and helpers of the integration suites (run_tests.py runs them).

The shared server, repository and arguments are attributes of this module
(common.SERVER, common.REPO, common.ARGS): run_tests.py sets ARGS; each
suite module imports setUpModule/tearDownModule from here.
"""
import re
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_client as gc  # noqa: E402
import inferd_client as ic  # noqa: E402
import make_fixtures  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARGS = None
SERVER = None
REPO = None
_STUBS = None
TOL = 1e-5
torch.set_num_threads(1)


# One input per datatype of the `dtypes` fixture, with edge values.
DTYPE_INPUTS = {
    "b": np.array([[True, False, True]]), "i8": np.array([[-128, 5, 63]], np.int8),
    "u8": np.array([[0, 7, 254]], np.uint8), "i16": np.array([[-300, 0, 300]], np.int16),
    "i32": np.array([[-5, 0, 2 ** 30]], np.int32), "i64": np.array([[-(2 ** 40), 1, 2 ** 50]], np.int64),
    "f16": np.array([[0.5, -1.25, 3.0]], np.float16), "f64": np.array([[0.1, 1e-300, -7.5]], np.float64),
}


def module(name, version=1):
    return torch.jit.load(os.path.join(REPO, name, str(version), "model.pt"))


def torch_ref(name, *arrays):
    with torch.no_grad():
        out = module(name)(*[torch.from_numpy(np.ascontiguousarray(a)) for a in arrays])
    if isinstance(out, dict):
        return {k: v.numpy() for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return [v.numpy() for v in out]
    return out.numpy()


def stubs():
    """The gRPC stubs, generated once per run by protoc from proto/."""
    global _STUBS
    if _STUBS is None:
        _STUBS = gc.Stubs(ROOT, os.path.join(ARGS.workdir, "grpc_stubs"))
    return _STUBS


def setUpModule():
    global SERVER, REPO
    REPO = os.path.join(ARGS.workdir, "repository")
    if not ARGS.reuse_repository:
        make_fixtures.main(REPO, ROOT)
    SERVER = ic.Server(ARGS.inferd, REPO, "--http-read-timeout-ms", "1500", "--http-max-body-bytes", "8388608")


def tearDownModule():
    if SERVER:
        rc = SERVER.stop()
        if rc != 0:
            print("".join(SERVER.log))
        assert rc == 0, "inferd exited with %d" % rc


def metric(text, name):
    """The value of an unlabelled sample in a Prometheus exposition."""
    m = re.search(r"^%s ([0-9.e+]+)$" % re.escape(name), text, re.M)
    if not m:
        raise AssertionError("no metric " + name)
    return float(m.group(1))


_spin_steps_per_second = None


def spin_steps(seconds):
    """Steps of the spin fixture that keep its one instance busy for about `seconds` on this build, far longer than
    what a test does meanwhile, so the requests sent behind it are still queued when the test acts on them.

    A step costs ~3 us in the release build and ~13 us under ASan, and TorchScript's first run of a model (its
    profiling run) is 3-15x slower still, so the rate is measured on the server under test after warming up."""
    global _spin_steps_per_second
    if _spin_steps_per_second is None:
        def run(steps):
            start = time.monotonic()
            st, js = SERVER.post_json("/v2/models/spin/infer", ic.v2_json_request({"x": np.array([[steps]], np.float32)}))
            assert st == 200 and js["outputs"][0]["data"] == [steps], (st, js)
            return time.monotonic() - start

        run(1000)  # the profiling run
        run(1000)
        _spin_steps_per_second = 20000 / run(20000)
    return int(seconds * _spin_steps_per_second)


def spin_counts():
    text = SERVER.metrics()
    labels = 'model="spin",version="1"'
    return {"exec": metric(text, "nv_inference_exec_count{%s}" % labels),
            "inferences": metric(text, "nv_inference_count{%s}" % labels),
            "pending": metric(text, "nv_inference_pending_request_count{%s}" % labels),
            "cancelled": metric(text, 'nv_inference_request_failure{%s,reason="CANCELED"}' % labels)}


def wait_spin_pending(test, n, busy=None):
    """Waits until the server holds n spin requests (its own gauge: queued + running), while `busy` runs."""
    while spin_counts()["pending"] != n:
        test.assertFalse(busy and busy.done(), "the busy request ended first: give it more seconds")


