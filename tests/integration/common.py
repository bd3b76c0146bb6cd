"""Shared state and helpers of the integration suites (run_tests.py runs them).

The shared server, repositories and arguments are attributes of this module
(common.SERVER, common.REPO, common.SERVED, common.ARGS): run_tests.py sets
ARGS; a suite module with a shared server sets `setUpModule = C.serving(<the
fixture models that server serves>)`, one without imports setUpModule; both
import tearDownModule from here.
"""
import re
import os
import shutil
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
REPO = None  # the fixture repository
SERVED = None  # the shared server's repository: links to the fixture models its suite uses
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


def assert_matches_torch(got, ref):
    """The server's answer against PyTorch's for the same rows. Not bit for bit: PyTorch here runs the rows as one
    batch and the server may run them alone or batched otherwise, and on some CPUs (AVX-512 OpenBLAS kernels) a
    one-row product rounds differently from the same row inside a batch (seen: 1 ulp, 3e-8)."""
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def stubs():
    """The gRPC stubs, generated once per run by protoc from proto/."""
    global _STUBS
    if _STUBS is None:
        # One folder per process: suites run in parallel (ctest -j) must not import each other's half-written
        # modules.
        _STUBS = gc.Stubs(ROOT, os.path.join(ARGS.workdir, "grpc_stubs", str(os.getpid())))
    return _STUBS


def fixture_repository():
    """The fixture repository (every model make_fixtures.py makes): C.REPO."""
    global REPO
    REPO = os.path.join(ARGS.workdir, "repository")
    if not ARGS.reuse_repository:
        make_fixtures.main(REPO, ROOT)
    return REPO


def served_repository(suite, models):
    """A repository of links to the fixture models `models`, for the servers of suite `suite` (made afresh, its
    control state too). A server of the whole fixture repository loads 79 models: under ASan that took ~15 s per
    start, a third of a short suite."""
    repo = os.path.join(ARGS.workdir, "served", suite, "repository")
    ic.remove_repository(repo)
    os.makedirs(repo)
    for m in models:
        if not os.path.isdir(os.path.join(REPO, m)):
            raise ValueError("no fixture model " + m)
        os.symlink(os.path.abspath(os.path.join(REPO, m)), os.path.join(repo, m))
    return repo


def setUpModule():
    """The setUpModule of a suite without a shared server (its tests start their own): C.REPO only."""
    fixture_repository()


def serving(*models):
    """The setUpModule of a suite whose shared server (C.SERVER) serves the fixture models `models` only, from
    C.SERVED (served_repository)."""
    suite = sys._getframe(1).f_globals["__name__"]

    def setUpModule():
        global SERVER, SERVED
        fixture_repository()
        SERVED = served_repository(suite, models)
        SERVER = ic.Server(ARGS.inferd, SERVED, "--http-read-timeout-ms", "1500", "--http-max-body-bytes", "8388608")
    return setUpModule


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


def gate(value):
    """The gate of the `held` model (the gate backend: its executions wait while the gate is closed; it starts
    closed): 1 opens it, 0 closes it, -1 only reads. Returns how many executions wait at the gate now."""
    st, js = SERVER.post_json("/v2/models/held_ctl/infer", ic.v2_json_request({"open": np.array([value], np.int32)}))
    assert st == 200, (st, js)
    return js["outputs"][0]["data"][0]


def held_counts():
    text = SERVER.metrics()
    labels = 'model="held",version="1"'
    return {"exec": metric(text, "nv_inference_exec_count{%s}" % labels),
            "inferences": metric(text, "nv_inference_count{%s}" % labels),
            "pending": metric(text, "nv_inference_pending_request_count{%s}" % labels),
            "cancelled": metric(text, 'nv_inference_request_failure{%s,reason="CANCELED"}' % labels)}


def client_cancellations():
    """Calls whose client the server saw go away (HTTP hang-up, gRPC cancel or deadline)."""
    return metric(SERVER.metrics(), "inferd_client_cancellations_total")


def wait_until(test, what, predicate, busy=None, timeout=60):
    """Polls the server (its own gauges and counters) until `predicate` holds, at most `timeout` seconds, failing
    early if the `busy` request ended first."""
    deadline = time.monotonic() + timeout
    while not predicate():
        test.assertFalse(busy is not None and busy.done(), "the busy request ended while waiting for " + what)
        test.assertLess(time.monotonic(), deadline, "timed out waiting for " + what)


def wait_held_pending(test, n, busy=None):
    """Waits until the server holds n `held` requests (its own gauge: queued + running)."""
    wait_until(test, "%d held requests" % n, lambda: held_counts()["pending"] == n, busy)


def wait_held_at_gate(test, n, busy=None):
    """Waits until n executions of `held` wait at its closed gate (their requests have left the queue)."""
    wait_until(test, "%d executions at the gate" % n, lambda: gate(-1) == n, busy)


def assert_failed_loads(test, expect, inputs):
    """expect: {model: text in its index reason}. Each model is UNAVAILABLE with that reason and refuses `inputs`."""
    import inferd_client as ic
    st, index = SERVER.post_json("/v2/repository/index", {})
    test.assertEqual(st, 200, index)
    reasons = {m["name"]: (m["state"], m.get("reason", "")) for m in index}
    for name, text in expect.items():
        with test.subTest(model=name):
            state, reason = reasons[name]
            test.assertEqual(state, "UNAVAILABLE", reason)
            test.assertIn(text, reason)
            st, js = SERVER.post_json("/v2/models/%s/infer" % name, ic.v2_json_request(inputs))
            test.assertNotEqual(st, 200, js)


def copy_model(repo, name, parameters, src="mlp"):
    """A copy of fixture model `src` in `repo` named `name`, its config with the given parameters added
    ({key: string value})."""
    dst = os.path.join(repo, name)
    shutil.copytree(os.path.join(REPO, src), dst)
    with open(os.path.join(dst, "config.pbtxt")) as f:
        config = "\n".join(line for line in f.read().splitlines() if not line.startswith("name:"))
    for k, v in parameters.items():
        config += '\nparameters { key: "%s" value: { string_value: "%s" } }' % (k, v)
    with open(os.path.join(dst, "config.pbtxt"), "w") as f:
        f.write('name: "%s"\n' % name + config + "\n")
