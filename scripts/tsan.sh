#!/usr/bin/env bash
# ThreadSanitizer over dtensor's cross-thread code (docs/RELIABILITY.md, "ThreadSanitizer"):
# builds ./build-tsan (DTENSOR_SANITIZE=thread, RelWithDebInfo at -O1 -g1, no CUDA) with only the
# targets below and runs each case REPEAT times (races are timing-dependent):
#   - the communication thread (comm_worker.h): async order, async redistribute (and its
#     gradient), CommDebugMode across it, data parallel's gradient reductions and gathers during
#     backward, compile's schedule_collectives;
#   - the p2p progress thread (p2p_progress.h): its own test, the pipeline's transfers and
#     schedules (pp, pp x tp, pp x dp, 3-D at 8 ranks), ring attention's hops;
#   - the intra-op pool (dtensor/ops/threads.h) and the caches several threads share
#     (propagation, einsum, the RNG's offsets), the collective thread rule, autograd's
#     per-thread grad mode and backward (two threads' backward passes at once).
# Any ThreadSanitizer report fails the run (halt_on_error=1, exit code 66). tests/tsan.supp
# names only Open MPI's libraries and frames, never a dtensor frame. OpenBLAS runs here with one
# thread (OPENBLAS_NUM_THREADS=1 below), so its own threads are not exercised by this script.
# Not in CI (.ci/run): on 2 cores the build from nothing took 344 s and REPEAT=3 278 s
# (docs/RELIABILITY.md). test_compile_mpi at 4 ranks (82 s a run) is left out: the same
# scheduled collectives run at 1 and 2. Environment: BUILD_DIR (default
# build-tsan), JOBS, REPEAT (default 3), TSAN_SKIP_BUILD=1 to run what is built, BUILD_LOCK (a
# file: the build step runs under `flock BUILD_LOCK`, as in bench_models.sh, on a shared machine).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build_dir=${BUILD_DIR:-build-tsan}
jobs=${JOBS:-$(nproc)}
repeat=${REPEAT:-3}
start=$(date +%s)

# Each case: "<ranks> <test target> [Catch2 test spec, the rest of the line]"; ranks 0: run
# without mpirun.
cases=(
  "0 test_threads"
  "0 test_sharding_propagation *propagation cache*"
  "0 test_einsum einsum plans are cached*"
  "0 rng_tests [gen]"
  "0 autograd_tests [threads]"
  "2 test_collective_check *thread*"
  "2 test_async_order_mpi"
  "1 test_redistribute_mpi [async]"
  "2 test_redistribute_mpi [async]"
  "4 test_redistribute_mpi [async]"
  "2 test_redistribute_grad_mpi [async]"
  "2 test_debug_tools_mpi"
  "2 test_p2p_progress_mpi"
  "2 test_transfer_mpi"
  "2 test_ring_progress_mpi"
  "2 test_context_parallel_mpi"
  "1 test_data_parallel_mpi"
  "2 test_data_parallel_mpi"
  "4 test_data_parallel_mpi"
  "1 test_compile_mpi"
  "2 test_compile_mpi"
  "2 test_pipeline_mpi ~[3d]"
  "4 test_pipeline_mpi ~[3d]"
  "8 test_pipeline_mpi [3d]"
)

if [ "${TSAN_SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$build_dir" -DDTENSOR_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DDTENSOR_CUDA=OFF -DDTENSOR_BUILD_BENCHMARKS=OFF -DDTENSOR_BUILD_EXAMPLES=OFF >/dev/null
  mapfile -t targets < <(printf '%s\n' "${cases[@]}" | awk '{ print $2 }' | sort -u)
  lock=()
  [ -n "${BUILD_LOCK:-}" ] && lock=(flock "$BUILD_LOCK")
  "${lock[@]}" cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
fi
built=$(date +%s)

# second_deadlock_stack: a lock-order report shows where both locks were taken. die_after_fork=0:
# test_threads forks a child that starts its own intra-op pool, which TSan otherwise refuses
# ("starting new threads after multi-threaded fork is not supported"); the child runs only its
# own pool's threads, and the test checks its result.
export TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1 die_after_fork=0"
# TSan runs the tests 5-15x slower: a generous collective deadline, one BLAS thread per rank.
export DTENSOR_COLLECTIVE_TIMEOUT=${DTENSOR_COLLECTIVE_TIMEOUT:-300}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
unset OPENBLAS_CORETYPE
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1
        --mca btl_vader_single_copy_mechanism none -x TSAN_OPTIONS -x DTENSOR_COLLECTIVE_TIMEOUT
        -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS)
logs="$build_dir/tsan-logs"
mkdir -p "$logs"
build_abs=$(cd "$build_dir" && pwd)
find_exe() { find "$build_abs/tests" -type f -name "$1" -perm -u+x | head -n 1; }

failed=0
for c in "${cases[@]}"; do
  read -r np target spec <<<"$c"
  exe=$(find_exe "$target")
  [ -n "$exe" ] || { echo "tsan: $target was not built"; failed=1; continue; }
  for i in $(seq 1 "$repeat"); do
    log="$logs/$target.np$np.$i.log"
    t0=$(date +%s)
    if [ "$np" = 0 ]; then
      cmd=("$exe" ${spec:+"$spec"})
    else
      cmd=("${mpirun[@]}" -np "$np" "$exe" ${spec:+"$spec"})
    fi
    rc=0
    (cd "$(dirname "$exe")" && timeout 900 "${cmd[@]}") >"$log" 2>&1 || rc=$?
    reports=$(grep -c 'WARNING: ThreadSanitizer' "$log" || true)
    echo "tsan: $target ${spec:-} np $np run $i: rc $rc, $reports reports, $(($(date +%s) - t0)) s"
    if [ "$rc" != 0 ] || [ "$reports" != 0 ]; then
      failed=1
      grep -A 40 'WARNING: ThreadSanitizer' "$log" | head -n 80 || tail -n 40 "$log"
    fi
  done
done
end=$(date +%s)
echo "tsan: build $((built - start)) s, tests $((end - built)) s: $([ $failed = 0 ] && echo clean || echo FAILED)"
exit $failed
