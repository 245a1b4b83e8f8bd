#!/bin/sh
# Usage: expect_job_ends.sh <max seconds> <pattern> [<pattern> ...] -- <mpirun command...>
# Passes when the command ends with a non-zero status within <max seconds> (a 90 s guard kills
# it otherwise: a hang) and its output matches every grep -E <pattern>. Exit 77 passes through
# (skipped). The output is printed either way.
max=$1
shift
patterns=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  patterns="$patterns
$1"
  shift
done
[ "$1" = "--" ] || { echo "expect_job_ends: missing -- before the command"; exit 2; }
shift
out=$(mktemp)
start=$(date +%s)
timeout 90 "$@" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "expect_job_ends: FAIL: $1 (exit $rc after ${elapsed}s)"; rm -f "$out"; exit 1; }
[ "$rc" -eq 77 ] && { rm -f "$out"; exit 77; }
[ "$rc" -ne 0 ] || fail "the job exited with status 0"
[ "$rc" -ne 124 ] || fail "the job hung until the 90 s guard killed it"
[ "$elapsed" -le "$max" ] || fail "the job took longer than $max s to end"
echo "$patterns" | while IFS= read -r p; do
  [ -z "$p" ] && continue
  grep -Eq -- "$p" "$out" || { echo "missing: $p"; exit 1; }
done || fail "the output lacks an expected pattern (see 'missing:' above)"
echo "expect_job_ends: PASS (exit $rc after ${elapsed}s)"
rm -f "$out"
exit 0
