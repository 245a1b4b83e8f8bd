#!/usr/bin/env bash
# Nightly fuzzing: the suite's fuzz entries with 10x the cases (DTENSOR_FUZZ_SCALE=10) and a
# longer time bound, each run straight under mpirun (no ctest timeout). Needs a configured and
# built tree (BUILD_DIR, default build). A different DTENSOR_FUZZ_SEED explores new cases.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target fuzz_redistribute \
  $(cmake --build "$build_dir" --target help | grep -qx '... fuzz_ops' && echo fuzz_ops)
export DTENSOR_FUZZ_SCALE=${DTENSOR_FUZZ_SCALE:-10}
export DTENSOR_FUZZ_SECONDS=${DTENSOR_FUZZ_SECONDS:-3600}
export DTENSOR_COLLECTIVE_TIMEOUT=${DTENSOR_COLLECTIVE_TIMEOUT:-120}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1
        --mca btl_vader_single_copy_mechanism none)
# The ctest entries' (np, entries, cases per entry) — kept in step with
# tests/reliability/CMakeLists.txt.
run() {  # run <target> <np> <entries> <cases>
  local target=$1 np=$2 entries=$3 cases=$4
  [ -x "$build_dir/tests/reliability/$target" ] || return 0
  for ((i = 0; i < entries; ++i)); do
    echo "== $target np $np entry $i ($((cases * DTENSOR_FUZZ_SCALE)) cases)"
    DTENSOR_FUZZ_ENTRY=$i DTENSOR_FUZZ_DEFAULT_CASES=$cases \
      "${mpirun[@]}" -np "$np" "$build_dir/tests/reliability/$target"
  done
}
run fuzz_redistribute 2 2 5000
run fuzz_redistribute 4 1 4000
run fuzz_redistribute 8 2 2000
run fuzz_ops 2 1 2500
run fuzz_ops 4 1 1500
run fuzz_ops 8 1 1000
echo "fuzz_nightly: all clean"
