#!/usr/bin/python3
"""Generates a test fixture once per `make test` run and copies it into each build that needs it.

The fixtures (the integration repository, XGBoost and LLM test models) are made by Python scripts with fixed seeds;
the ASan, TSan and release stages used to make each of them again. This keeps one generated copy per content key
under the cache folder (default: build-fixtures/ beside the sources; `make clean` removes it) and copies it to
DEST, so every build still gets a private copy it may write beside (labels, control state).

The key covers the generator's input files (--inputs: files or folders, *.py in them) and the Python, torch,
xgboost and onnx versions: an edit of any generator makes a new copy. A half-made copy never counts: generation
writes to a temporary folder that is renamed into place when the generator succeeded.

Usage: fixture_cache.py --cache DIR --name NAME --dest DIR --inputs PATH... [--also-remove PATH] -- COMMAND...
({out} in COMMAND: where the generator writes)
"""
import argparse
import fcntl
import hashlib
import importlib
import os
import shutil
import subprocess
import sys


def input_files(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += [os.path.join(p, f) for f in os.listdir(p) if f.endswith(".py")]
        elif os.path.exists(p):
            files.append(p)
        else:
            raise SystemExit("fixture_cache: no input " + p)
    return sorted(set(os.path.abspath(f) for f in files))


def key_of(files, command):
    h = hashlib.sha256()
    h.update(sys.version.encode())
    for mod in ("torch", "xgboost", "onnx", "numpy"):
        try:
            h.update(("%s=%s;" % (mod, importlib.import_module(mod).__version__)).encode())
        except ImportError:
            h.update(("%s=none;" % mod).encode())
    for f in files:
        h.update(os.path.basename(f).encode())
        with open(f, "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    h.update(" ".join(os.path.basename(c) for c in command).encode())
    return h.hexdigest()[:16]


def main():
    if "--" not in sys.argv:
        raise SystemExit(__doc__)
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--dest", required=True)
    parser.add_argument("--inputs", nargs="+", required=True)
    parser.add_argument("--also-remove", action="append", default=[],
                        help="removed with DEST (state a server kept beside an earlier copy)")
    args = parser.parse_args(sys.argv[1:split])
    command = sys.argv[split + 1:]
    os.makedirs(args.cache, exist_ok=True)
    key = key_of(input_files(args.inputs), command)
    ready = os.path.join(args.cache, "%s-%s" % (args.name, key))
    with open(os.path.join(args.cache, args.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one generator per fixture at a time
        if os.path.isdir(ready):
            print("fixture_cache: %s reused (%s)" % (args.name, ready))
        else:
            tmp = ready + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            subprocess.check_call([c.replace("{out}", tmp) for c in command])
            for old in os.listdir(args.cache):  # earlier keys of this fixture are stale now
                if old.startswith(args.name + "-") and not old.endswith(".tmp"):
                    shutil.rmtree(os.path.join(args.cache, old), ignore_errors=True)
            os.rename(tmp, ready)
            print("fixture_cache: %s generated (%s)" % (args.name, ready))
    for p in [args.dest] + args.also_remove:
        shutil.rmtree(p, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.dest)), exist_ok=True)
    shutil.copytree(ready, args.dest, symlinks=True)


if __name__ == "__main__":
    main()
