#!/usr/bin/env bash
# Builds the benchmarks (Release, CUDA off), runs them all and rewrites docs/PERFORMANCE.md
# from their output (machine description, exact commands, one table per benchmark with each
# figure beside its target, "missed by X%" lines).
#
#   scripts/bench.sh                      # ~5-10 minutes on a 2-core machine
#
# The "PyTorch DTensor side by side" section of docs/PERFORMANCE.md comes from a separate run,
# scripts/bench_vs_pytorch.sh --doc; this script keeps that section as it is. The "Models and
# the other parallelisms" section comes from scripts/bench_models.sh --doc, which this script
# runs last (MODELS=0 skips it and keeps the section; it needs TORCH_PYTHON
# [/root/venv/bin/python] with torch and transformers for the Llama's comparison, ~6 minutes).
#
# Environment (defaults in brackets):
#   BUILD_DIR [build-bench]     build directory (relative to the repo root or absolute)
#   JOBS [2]                    parallel build jobs
#   NP [4]                      ranks for bench_redistribute (the 2-D cases need 4)
#   REDIST_MAX_BYTES [16777216] largest global size in bench_redistribute (4 KB .. this, x4).
#                               16 MB keeps the script under ~10 minutes on a 2-core machine
#                               and still covers the ">= 16 MB" targets; the program's own
#                               default is 64 MB and 268435456 (256 MB) is the full sweep
#   TP_RANKS ["1 2 4"]          rank counts for bench_tp and bench_train
#   RNG_MAX_MB [64]             largest size in bench_rng (the full sweep is 256)
#   CALLGRIND [1]               0 skips the valgrind instruction counts of cache-hit dispatches
#   CALLGRIND_OPS ["add mul mm sum transpose"]  ops counted under callgrind (cache hit and
#                               autograd recording)
#   TORCH_VENV [/tmp/dtensor-torch-venv]  when its python imports torch, the local-kernel
#                               benchmark also runs under PyTorch (nothing is installed here:
#                               scripts/bench_kernels_vs_pytorch.sh creates the environment)
#   CKPT_MB [256]               model size in bench_checkpoint (written to CKPT_DIR)
#   CKPT_DIR [/tmp/dtensor_bench_ckpt]  where bench_checkpoint writes (the disk measured)
#   DOC [docs/PERFORMANCE.md]   the file rewritten
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build-bench}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
NP=${NP:-4}
REDIST_MAX_BYTES=${REDIST_MAX_BYTES:-16777216}
TP_RANKS=${TP_RANKS:-"1 2 4"}
RNG_MAX_MB=${RNG_MAX_MB:-64}
CALLGRIND=${CALLGRIND:-1}
DOC=${DOC:-docs/PERFORMANCE.md}
RES="$BUILD_DIR/benchmarks/results"
TARGETS="bench_rng bench_dispatch bench_cache bench_redistribute bench_tp bench_train bench_dp bench_compile
bench_strategy bench_collective_check bench_kernels bench_checkpoint bench_gather_into_dim"

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DDTENSOR_CUDA=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target $TARGETS
mkdir -p "$RES"
rm -f "$RES"/*.jsonl "$RES"/*.txt

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DTENSOR_COLLECTIVE_TIMEOUT=600
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
--mca btl_vader_single_copy_mechanism none"
B="$BUILD_DIR/benchmarks"
rel() { echo "${1#"$ROOT"/}"; }

# run NAME CMD...: runs CMD, tees stdout to $RES/NAME.txt, records the command line.
run() {
  local name=$1
  shift
  echo "$(rel "$*" | sed "s|$ROOT/||g")" >>"$RES/commands.txt"
  echo "+ $*" >&2
  if ! "$@" | tee "$RES/$name.txt"; then
    echo "$name: exit status ${PIPESTATUS[0]}" | tee -a "$RES/failures.txt" >&2
  fi
}

T0=$(date +%s)
STARTED=$(date -u '+%Y-%m-%d %H:%M UTC')
run dispatch "$B/dispatch/bench_dispatch" --json "$RES/bench_dispatch.jsonl"
run cache "$B/dispatch/bench_cache" --steps 100 --json "$RES/bench_cache.jsonl"

# Instructions per cache-hit dispatch: callgrind counts N and 2N calls (instrumentation only
# around the loop); (I(2N) - I(N)) / N with N = 2000, for the DTensor op and for the same local
# op (with N = 1000 the first calls' heap growth showed up as +-900 instructions on add).
# glibc's malloc/free internals are left out (benchmarks/dispatch/callgrind_count.py): their
# path length follows the heap's layout and varied by up to ~700 instructions a call between
# runs of one binary, the rest within a few; callgrind_detail.txt keeps the total and the
# allocator's share ("op mode total allocator rest").
: >"$RES/callgrind.txt"
: >"$RES/callgrind_detail.txt"
# cg_count OUT FILE ARGS...: instructions "TOTAL ALLOCATOR" of bench_dispatch ARGS under callgrind.
cg_count() {
  local f=$1
  shift
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$f" \
    "$B/dispatch/bench_dispatch" "$@" >/dev/null 2>&1 || true
  [ -s "$f" ] && python3 "$ROOT/benchmarks/dispatch/callgrind_count.py" "$f"
  rm -f "$f"
}
if [ "$CALLGRIND" != 0 ] && command -v valgrind >/dev/null; then
  echo "valgrind --tool=callgrind --instr-atstart=no $(rel "$B")/dispatch/bench_dispatch" \
    "--callgrind OP --calls N [--local], OP in ${CALLGRIND_OPS:-add mul mm sum transpose}," \
    "N = 2000 and 4000; glibc allocator excluded (benchmarks/dispatch/callgrind_count.py)" \
    >>"$RES/commands.txt"
  cg_out=$(mktemp /tmp/dtensor_callgrind.XXXXXX)
  for op in ${CALLGRIND_OPS:-add mul mm sum transpose}; do
    "$B/dispatch/bench_dispatch" --callgrind "$op" --calls 1 >/dev/null 2>&1 || continue
    for mode in dtensor local; do
      flag=""
      [ "$mode" = local ] && flag="--local"
      # The plain cache-hit call, then the same call recorded by autograd (dtensor) vs not
      # (local): the recording's count.
      for kind in "" record-; do
        rec=""
        [ -n "$kind" ] && rec="--record"
        # shellcheck disable=SC2086
        c1=$(cg_count "$cg_out" --callgrind "$op" $rec --calls 2000 $flag)
        # shellcheck disable=SC2086
        c2=$(cg_count "$cg_out" --callgrind "$op" $rec --calls 4000 $flag)
        if [ -n "$c1" ] && [ -n "$c2" ]; then
          read -r t1 a1 <<<"$c1"
          read -r t2 a2 <<<"$c2"
          total=$(((t2 - t1) / 2000))
          alloc=$(((a2 - a1) / 2000))
          echo "$kind$op $mode $((total - alloc))" | tee -a "$RES/callgrind.txt"
          echo "$kind$op $mode $total $alloc $((total - alloc))" >>"$RES/callgrind_detail.txt"
        fi
      done
    done
  done
  rm -f "$cg_out"
fi

run collective_check $MPIRUN -np "$NP" "$B/collectives/bench_collective_check" \
  --json "$RES/bench_collective_check.jsonl"
run gather_into_dim $MPIRUN -np "$NP" "$B/collectives/bench_gather_into_dim" \
  --json "$RES/bench_gather_into_dim.jsonl"
run redistribute $MPIRUN -np "$NP" "$B/redistribute/bench_redistribute" \
  --max-bytes "$REDIST_MAX_BYTES" --json "$RES/bench_redistribute.jsonl"
for np in $TP_RANKS; do
  run "tp_np$np" $MPIRUN -np "$np" "$B/transformer/bench_tp" --json "$RES/bench_tp_np$np.jsonl"
done
for np in $TP_RANKS; do
  run "train_np$np" $MPIRUN -np "$np" "$B/train/bench_train" --json "$RES/bench_train_np$np.jsonl"
done
for np in $TP_RANKS; do
  run "dp_np$np" $MPIRUN -np "$np" "$B/train/bench_dp" --json "$RES/bench_dp_np$np.jsonl"
done
for np in $TP_RANKS; do
  run "compile_np$np" $MPIRUN -np "$np" "$B/compile/bench_compile" \
    --json "$RES/bench_compile_np$np.jsonl"
done
run strategy $MPIRUN -np 4 "$B/dispatch/bench_strategy" --json "$RES/bench_strategy.jsonl"
run rng "$B/rng/bench_rng" "$RNG_MAX_MB" 0.3 --json "$RES/bench_rng.jsonl"
# The GEMM library and kernel every GEMM-bound figure ran on (dtensor/ops/matmul/blas_info.h).
"$B/kernels/bench_kernels" --gemm-info >"$RES/kernels_gemm.txt"
# Local CPU kernels, one thread; beside PyTorch when a PyTorch environment exists.
run kernels "$B/kernels/bench_kernels" --json "$RES/kernels_ours.r1.jsonl"
TORCH_PY="${TORCH_VENV:-/tmp/dtensor-torch-venv}/bin/python"
if "$TORCH_PY" -c "import torch" 2>/dev/null; then
  run kernels_torch "$TORCH_PY" "$ROOT/benchmarks/kernels/bench_kernels_torch.py" \
    --json "$RES/kernels_torch.r1.jsonl"
fi
# The same kernels on KERNEL_THREADS intra-op threads (dtensor/ops/threads.h; both sides), one process
# alone on the machine.
KT=${KERNEL_THREADS:-2}
run kernels_threads "$B/kernels/bench_kernels" --threads "$KT" \
  --json "$RES/kernels_ours_t$KT.r1.jsonl"
if "$TORCH_PY" -c "import torch" 2>/dev/null; then
  run kernels_torch_threads "$TORCH_PY" "$ROOT/benchmarks/kernels/bench_kernels_torch.py" \
    --threads "$KT" --json "$RES/kernels_torch_t$KT.r1.jsonl"
fi
for np in 1 2; do
  run "checkpoint_np$np" $MPIRUN -np "$np" "$B/checkpoint/bench_checkpoint" --mb "${CKPT_MB:-256}" \
    --dir "${CKPT_DIR:-/tmp/dtensor_bench_ckpt}" --json "$RES/bench_checkpoint_np$np.jsonl"
done
T1=$(date +%s)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 "$ROOT/benchmarks/make_report.py" --results "$RES" --out "$ROOT/$DOC" \
  --build-dir "$(rel "$BUILD_DIR")" --load-before "$LOAD_BEFORE" --load-after "$LOAD_AFTER" \
  --seconds "$((T1 - T0))" --date "$STARTED" \
  --env "NP=$NP REDIST_MAX_BYTES=$REDIST_MAX_BYTES TP_RANKS=\"$TP_RANKS\" RNG_MAX_MB=$RNG_MAX_MB"
echo "wrote $DOC (benchmarks ran $((T1 - T0)) s)"
if [ "${MODELS:-1}" != 0 ]; then
  BUILD_DIR="$BUILD_DIR" DOC="$DOC" "$ROOT/scripts/bench_models.sh" --doc >/dev/null ||
    echo "bench_models.sh failed: see $RES/models/failures.txt" >&2
fi
