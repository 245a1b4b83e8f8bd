#!/usr/bin/env bash
# The sanitizer configuration of the suite (docs/RELIABILITY.md): builds ./build-asan with
# AddressSanitizer + UndefinedBehaviorSanitizer (RelWithDebInfo at -O1: close to Debug for the
# reports, much faster to run) and runs, for a fixed core subset plus the layers a change touches
# (scripts/sanitize_select.py; the change: what differs from the commit in .ci/sanitize-base):
#   - the `unit` tests of those layers (single process), and
#   - a subset of the `mpi` tests at 2 and 4 ranks (collectives, device mesh, DTensor core,
#     redistribute, the bad-input catalogues, 1000 redistribute fuzz cases per entry, point-to-point
#     progress; and, when their layer changed, step capture / replay, whose replay runs kernels on
#     tensors the capture kept, and transfers, which a progress thread polls while the rank computes).
# Any ASan or UBSan report fails the run (-fno-sanitize-recover=all; halt_on_error=1).
# LeakSanitizer is off: every process that touches MPI (the mpirun tests and the unit suites
# that reach the world communicator) keeps Open MPI's allocations, some in MCA components that
# are unloaded at exit and cannot even be named in a suppressions file.
# Only the targets that run are built. Environment: BUILD_DIR (default build-asan), JOBS,
# SANITIZE_MPI=0 to run the unit tests only, SANITIZE_ALL=1 for every unit target and mpi suite.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-asan}
jobs=${JOBS:-$(nproc)}
start=$(date +%s)

# -g1: line tables only (functions and file:line, what a sanitizer's stack needs; no types or
# locals). Against -g it cut the compile CPU time of sampled objects by 25-30% and their size by
# 2-3x (the whole rebuild was 26 min of CI's 47 at -g on 2 cores).
cmake -S . -B "$build_dir" -DDTENSOR_SANITIZE=address,undefined \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DDTENSOR_CUDA="${DTENSOR_CUDA:-OFF}" >/dev/null

# What to build and run: a fixed core subset plus the layers changed since .ci/sanitize-base
# (scripts/sanitize_select.py; SANITIZE_ALL=1 takes every unit target and the whole mpi subset).
# Three lines: the targets, a ctest regex of their unit entries, the mpi targets.
# (An assignment, so that a failing selector stops the script under set -e.)
selected=$(python3 scripts/sanitize_select.py "$build_dir" .)
mapfile -t selection <<<"$selected"
read -r -a targets <<<"${selection[0]}"
unit_regex=${selection[1]}
read -r -a mpi_targets <<<"${selection[2]}"

cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
built=$(date +%s)

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# No detect_stack_use_after_return: its fake stack frames are only 32-byte aligned under GCC 12,
# while the AVX-512 kernels (Highway's AVX3 targets, chosen at run time on CPUs that have it)
# keep 64-byte aligned vectors on the stack, so every such machine faulted on an aligned store
# (vmovdqa64, reported as a SEGV in dtensor/ops/common/detail/simd_math-inl.h) that is fine on a real stack.
# allocator_may_return_null: an allocation too large to exist returns null, as it does without
# ASan, so the library raises its own error (test_bad_inputs_ops allocates 4 PiB on one rank on
# purpose); by default ASan would end the process instead.
export ASAN_OPTIONS=detect_leaks=0:strict_string_checks=1:allocator_may_return_null=1
cd "$build_dir"
# build_warnings is the Release build's gate (scripts/check_warnings.sh): GCC's -O1 +
# sanitizer builds print false positives (-Wmaybe-uninitialized, -Wstringop-overflow) a release
# build does not, so this folder's records are not checked (the regex leaves it out).
# Only the sanitized executables' entries (the script checks, e.g. format_check, run in build/).
if [ -n "$unit_regex" ]; then ctest -L unit -R "$unit_regex" --output-on-failure -j "$jobs"; fi
unit_done=$(date +%s)

if [ "${#mpi_targets[@]}" -gt 0 ]; then
  regex=$(printf '%s|' "${mpi_targets[@]}")
  regex="^(${regex%|})\\.np[234](\\.0)?\$"  # np3: test_collectives' rank-ordered chunks
  # The fuzz entries run a slice under the sanitizers (the full count runs in build/).
  DTENSOR_FUZZ_CASES=${SANITIZE_FUZZ_CASES:-1000} ctest -R "$regex" --output-on-failure -j 1
fi
end=$(date +%s)
echo "sanitize: build $((built - start)) s, unit tests $((unit_done - built)) s," \
     "mpi tests $((end - unit_done)) s: clean"
