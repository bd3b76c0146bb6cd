#!/usr/bin/env bash
# Runs `make test`'s stages in order (each a Makefile target), times each one,
# and prints a table of stage times at the end -- also when a stage fails (the
# run stops there). The last line is "stages: N passed, N failed".
#   scripts/test_stages.sh STAGE...
set -uo pipefail
cd "$(dirname "$0")/.."
names=()
secs=()
results=()
rc=0
t_all=$(date +%s)
for stage in "$@"; do
  t0=$(date +%s)
  echo "=== make $stage"
  make --no-print-directory "$stage"
  r=$?
  names+=("$stage")
  secs+=($(( $(date +%s) - t0 )))
  if [ $r -ne 0 ]; then
    results+=("FAILED")
    rc=$r
    break
  fi
  results+=("ok")
done
total=$(( $(date +%s) - t_all ))
echo
echo "make test: stage times ($(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ))"
printf '| %-12s | %8s | %-6s |\n' stage seconds result
printf '|--------------|----------|--------|\n'
passed=0
failed=0
for i in "${!names[@]}"; do
  printf '| %-12s | %8d | %-6s |\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
  if [ "${results[$i]}" = ok ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
printf '| %-12s | %8d | %-6s |\n' total "$total" "$( [ $rc -eq 0 ] && echo ok || echo FAILED)"
echo "stages: $passed passed, $failed failed"
exit $rc
