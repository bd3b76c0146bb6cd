"""Integration suite: the response cache (Triton's response_cache; run by run_tests.py)."""
import os
import shutil
import sys
import textwrap
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import inferd_client as ic  # noqa: E402
from common import setUpModule, tearDownModule  # noqa: E402,F401

# Y = X * version; CALLS counts the executions of this instance, so a cached answer shows an old count.
COUNTED = textwrap.dedent("""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.version = int(args["model_version"])
            self.calls = 0

        def execute(self, requests):
            out = []
            for r in requests:
                self.calls += 1
                x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x * self.version).astype(np.float32)),
                                                       pb_utils.Tensor("CALLS", np.array([self.calls], np.int64))]))
            return out
    """).lstrip()


def make_repo(root):
    shutil.rmtree(root, ignore_errors=True)
    for name, cache in (("cached", True), ("uncached", False)):
        m = os.path.join(root, name)
        for v in (1, 2):
            os.makedirs(os.path.join(m, str(v)))
            with open(os.path.join(m, str(v), "model.py"), "w") as f:
                f.write(COUNTED)
        with open(os.path.join(m, "config.pbtxt"), "w") as f:
            f.write('backend: "python"\nversion_policy { all {} }\n'
                    'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]\n'
                    'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1, -1 ] }, '
                    '{ name: "CALLS" data_type: TYPE_INT64 dims: [ 1 ] } ]\n' +
                    ("response_cache { enable: true }\n" if cache else ""))


class Cache(unittest.TestCase):
    def test_repeated_inputs_are_answered_from_the_cache_and_every_answer_is_right(self):
        repo = os.path.join(C.ARGS.workdir, "cache_repository")
        make_repo(repo)
        state = os.path.join(C.ARGS.workdir, "cache_state")
        shutil.rmtree(state, ignore_errors=True)
        server = ic.Server(C.ARGS.inferd, repo, "--cache-config", "local,size=1048576", "--control-state-dir", state,
                           "--model-control-mode", "explicit", "--load-model", "*")
        try:
            def infer(model, x, version=None):
                path = "/v2/models/%s%s/infer" % (model, "/versions/%s" % version if version else "")
                st, js = server.post_json(path, ic.v2_json_request({"X": np.asarray(x, np.float32)}))
                self.assertEqual(st, 200, js)
                outs = {o["name"]: o for o in js["outputs"]}
                return outs["Y"]["data"], outs["Y"]["shape"], outs["CALLS"]["data"][0], js["model_version"]

            y, shape, calls, _ = infer("cached", [[1, 2, 3]])
            self.assertEqual((y, shape), ([2, 4, 6], [1, 3]))  # version 2 is the default (newest)
            self.assertEqual(infer("cached", [[1, 2, 3]]), (y, shape, calls, "2"))  # CALLS unchanged: the cache
            self.assertEqual(infer("cached", [[1, 2, 4]])[0], [2, 4, 8])  # other bytes: computed
            # The same bytes in another shape are another request (Triton's key would collide here).
            self.assertEqual(infer("cached", [[1], [2], [3]])[:2], ([2, 4, 6], [3, 1]))
            # Another version never answers from version 2's entries.
            self.assertEqual(infer("cached", [[1, 2, 3]], version="1")[0], [1, 2, 3])
            # Unique inputs are all right; the uncached model executes every time.
            for i in range(50):
                self.assertEqual(infer("cached", [[i, i + 1]])[0], [2 * i, 2 * i + 2])
            first = infer("uncached", [[5]])[2]
            self.assertEqual(infer("uncached", [[5]])[2], first + 1)
            st, stats = server.get_json("/v2/models/cached/versions/2/stats")
            inf = stats["model_stats"][0]["inference_stats"]
            self.assertEqual(inf["cache_hit"]["count"], 1, inf)
            self.assertGreaterEqual(inf["cache_miss"]["count"], 53, inf)
            metrics = server.metrics()
            self.assertIn('nv_cache_num_hits_per_model{model="cached",version="2"} 1', metrics)
            self.assertNotIn('nv_cache_num_hits_per_model{model="uncached"', metrics)
            self.check_swaps_and_rollbacks(server, repo, infer)
        finally:
            self.assertEqual(server.stop(), 0)

    def check_swaps_and_rollbacks(self, server, repo, infer):
        """A default that moves (labels, rollback) or a version reloaded with new files never gets a stale answer."""
        def put_stable(v):
            st, _, data = server.request("PUT", "/v2/repository/models/cached/labels/stable",
                                         ('{"version": "%s"}' % v).encode())
            self.assertEqual(st, 200, data)

        x = [[1, 2, 3]]
        calls2 = infer("cached", x)[2]
        put_stable("1")
        self.assertEqual(infer("cached", x)[0::3], ([1, 2, 3], "1"))
        put_stable("2")
        self.assertEqual(infer("cached", x), ([2, 4, 6], [1, 3], calls2, "2"))  # version 2's entry, still right
        st, _, data = server.request("POST", "/v2/repository/models/cached/rollback")
        self.assertEqual(st, 200, data)
        self.assertEqual(infer("cached", x)[0::3], ([1, 2, 3], "1"))
        put_stable("2")
        # Version 2 reloaded with new files (Y = 20 X): a new snapshot, so nothing cached for the old one answers.
        with open(os.path.join(repo, "cached", "2", "model.py"), "w") as f:
            f.write(COUNTED.replace("(x * self.version)", "(x * self.version * 10)"))
        st, _, data = server.request("POST", "/v2/repository/models/cached/load", b"{}")
        self.assertEqual(st, 200, data)
        y, _, calls, version = infer("cached", x)
        self.assertEqual((y, calls, version), ([20, 40, 60], 1, "2"))
        self.assertEqual(infer("cached", x)[:3], ([20, 40, 60], [1, 3], 1))  # and that answer is cached

    def test_a_bad_cache_config_is_refused(self):
        import subprocess
        r = subprocess.run([C.ARGS.inferd, "serve", "--model-repository", C.REPO, "--cache-config", "redis,size=5"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--cache-config", r.stderr)


if __name__ == "__main__":
    unittest.main()
