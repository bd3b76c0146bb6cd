#!/usr/bin/python3
"""Integration tests: the real inferd binary against a generated repository.

Every numerical answer is compared with the same TorchScript file run by
PyTorch in this process (abs tol 1e-5). No sleeps: tests wait on responses,
on the server's own counters, or on a socket closing.

The suites live in suite_*.py (one unittest class each); common.py holds the
shared server and helpers.

Usage: run_tests.py --inferd PATH --workdir DIR [--reuse-repository] [unittest args, e.g. a class name]
"""
import argparse
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

SUITES = ["infer", "batch", "jobs", "protocol", "grpc", "bad_input", "bench", "explicit_control", "lifecycle", "residency", "frameworks",
          "shutdown", "pipelines", "python", "traffic", "rollout", "cache", "hybrid", "features", "generative", "lora",
          "bucketing", "cluster", "tracing", "console", "security", "quantization", "tune"]


class TimedResult(unittest.TextTestResult):
    """Prints each test's wall time after its verdict ("ok (3.2 s)"), and the slowest at the end."""

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        elapsed = time.monotonic() - self._started
        self.times = getattr(self, "times", []) + [(elapsed, test.id())]
        if self.showAll:
            self.stream.writeln("    (%.1f s)" % elapsed)
        super().stopTest(test)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inferd", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--reuse-repository", action="store_true",
                        help="use WORKDIR/repository as it is (made by make_fixtures.py)")
    C.ARGS, rest = parser.parse_known_args()
    os.makedirs(C.ARGS.workdir, exist_ok=True)
    loader = unittest.TestLoader()
    names = [a for a in rest if not a.startswith("-")]
    suite = unittest.TestSuite()
    for s in SUITES:
        mod = __import__("suite_" + s)
        for cls in [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, unittest.TestCase)]:
            if cls.__module__ != mod.__name__:
                continue
            if names and not any(n == cls.__name__ or n.startswith(cls.__name__ + ".") for n in names):
                continue
            wanted = [n.split(".", 1)[1] for n in names if n.startswith(cls.__name__ + ".")]
            suite.addTests([cls(m) for m in wanted] if wanted else loader.loadTestsFromTestCase(cls))
    r = unittest.TextTestRunner(verbosity=2, resultclass=TimedResult).run(suite)
    for elapsed, name in sorted(getattr(r, "times", []), reverse=True)[:5]:
        print("slowest: %6.1f s  %s" % (elapsed, name))
    failed = len(r.failures) + len(r.errors)
    print("%d passed, %d failed, %d skipped" % (r.testsRun - failed - len(r.skipped), failed, len(r.skipped)))
    sys.exit(0 if r.wasSuccessful() and r.testsRun > 0 else 1)


if __name__ == "__main__":
    main()
