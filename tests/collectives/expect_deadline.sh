#!/bin/sh
# Usage: expect_deadline.sh <mpirun command...>
# Passes when the command ends with a non-zero status (not by the 60 s guard) within 30 s and
# its output names the collective (all_reduce), says "deadline" and names the communicator.
out=$(mktemp)
start=$(date +%s)
timeout 60 "$@" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "expect_deadline: FAIL: $1 (exit $rc after ${elapsed}s)"; rm -f "$out"; exit 1; }
[ "$rc" -eq 77 ] && { rm -f "$out"; exit 77; }
[ "$rc" -ne 0 ] || fail "the job exited with status 0"
[ "$rc" -ne 124 ] || fail "the job hung until the 60 s guard killed it"
[ "$elapsed" -le 30 ] || fail "the job took longer than 30 s to end"
grep -q "\[all_reduce\]" "$out" || fail "no [all_reduce] in the output"
grep -q "deadline" "$out" || fail "no 'deadline' in the output"
grep -q "mesh dim 0 (probe)" "$out" || fail "the communicator description is missing"
grep -q "world ranks \[0, 1\]" "$out" || fail "the communicator's ranks are missing"
grep -q "\[4, 3\] float32" "$out" || fail "the tensor shape and dtype are missing"
echo "expect_deadline: PASS (exit $rc after ${elapsed}s)"
rm -f "$out"
exit 0
