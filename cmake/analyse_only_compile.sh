#!/bin/bash
# A compiler launcher for the clang build's analysis-only targets (cmake/analysis_only.cmake):
#   analyse_only_compile.sh <compiler> <arguments...>
# runs the compiler with -fsyntax-only instead of -c (parsing and semantic analysis: every warning,
# -Wthread-safety and -Werror, the dependency file for ninja; no code generation), then writes an empty object
# where the object was asked for, so the archive steps still have their inputs. Precompiled headers are built as
# asked (the files that include them need the real thing).
set -e
compiler=$1
shift
for arg in "$@"; do
  if [[ $arg == -emit-pch || $arg == *.pch || $arg == *.gch ]]; then
    exec "$compiler" "$@"
  fi
done
args=()
out=
while (($#)); do
  case $1 in
    -o) out=$2; shift 2 ;;
    -c) shift ;;
    *) args+=("$1"); shift ;;
  esac
done
"$compiler" "${args[@]}" -fsyntax-only
"$compiler" -x c++ -c /dev/null -o "$out"
