#!/bin/bash
# A linker launcher for the clang build's analysis-only executables (cmake/analysis_only.cmake): their objects
# are empty (analyse_only_compile.sh), so nothing is linked; an empty file stands where the executable was asked
# for. The release, ASan and TSan builds link every one of them.
set -e
out=
while (($#)); do
  if [[ $1 == -o ]]; then out=$2; shift 2; else shift; fi
done
: > "$out"
