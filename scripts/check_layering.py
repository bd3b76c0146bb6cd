#!/usr/bin/python3
"""Fails when a source file under src/ includes a header of a folder that is not below its own.

The order lives in src/layers.txt (lowest first, one level per line). Every folder of src/ that holds C++ files
must belong to a listed folder (a new folder is placed there on purpose, not by accident). Exit 1 lists every
include that breaks the order, with the file and line.

Usage: scripts/check_layering.py [--root SRC]
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_layers(path):
    levels = {}
    level = 0
    with open(path) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            for w in words:
                if w in levels:
                    raise SystemExit("%s: folder %s listed twice" % (path, w))
                levels[w.rstrip("/")] = level
            level += 1
    return levels


def unit_of(rel, levels):
    """The longest listed folder holding `rel` (a path under src/), or None."""
    parts = rel.split("/")[:-1]
    for k in range(len(parts), 0, -1):
        folder = "/".join(parts[:k])
        if folder in levels:
            return folder
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    levels = read_layers(os.path.join(root, "layers.txt"))
    errors, files = [], 0
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if not name.endswith((".h", ".cc", ".cc.in")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            unit = unit_of(rel, levels)
            if unit is None:
                errors.append("%s: its folder is not in src/layers.txt" % rel)
                continue
            if name.endswith("_test.cc"):
                continue
            files += 1
            with open(path, errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or not os.path.exists(os.path.join(root, m.group(1))):
                        continue  # system, generated or third-party headers
                    target = unit_of(m.group(1), levels)
                    if target is None:
                        errors.append("%s:%d: includes %s, whose folder is not in src/layers.txt" % (rel, n, m.group(1)))
                    elif target != unit and levels[target] >= levels[unit]:
                        how = "the same level as" if levels[target] == levels[unit] else "above"
                        errors.append("%s:%d: %s (%s) includes %s: %s is %s %s in src/layers.txt"
                                      % (rel, n, unit, "level %d" % levels[unit], m.group(1), target, how, unit))
    if errors:
        print("layering: %d include(s) break the folder order of src/layers.txt:" % len(errors))
        for e in errors:
            print("  " + e)
        sys.exit(1)
    print("layering: %d files, %d folders, every include points down" % (files, len(levels)))


if __name__ == "__main__":
    main()
