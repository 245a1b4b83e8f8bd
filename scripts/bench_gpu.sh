#!/usr/bin/env bash
# GPU figures and the gpu suite, on a machine with an NVIDIA GPU (not part of the test command;
# CI has no GPU). Builds with CUDA for the visible GPU, runs the gpu test label, bench_gpu (copy
# bandwidth, elementwise / RNG / softmax / layer_norm bandwidth as a fraction of it, GEMM against
# cuBLAS called directly), bench_gpu --redistribute on 2 ranks sharing the GPU (MPI staging), and
# the examples on the CPU and with --cuda, and the CPU suite of the same build on every core;
# prints everything. The "why" of each miss (written after profiling) is kept in
# benchmarks/gpu/notes.md, which the report puts beside the figures.
#
#   scripts/bench_gpu.sh          # prints the figures
#   scripts/bench_gpu.sh --doc    # and rewrites the "GPU (CUDA)" section of docs/PERFORMANCE.md
#                                 # (scripts/bench.sh keeps that section when it regenerates
#                                 # the rest of the file)
#
# Environment (defaults in brackets): BUILD_DIR [build-gpu], JOBS [nproc], RESULTS
# [$BUILD_DIR/benchmarks/results/gpu].
#
# Sourced (`source scripts/bench_gpu.sh`), it only defines what to run, for scripts/gpu_bundle.sh
# (builds and packs these programs here) and scripts/gpu_run.sh (runs them on a lent GPU machine
# from that bundle): GPU_FIGURE_PROGRAMS, gpu_suite, gpu_figures and gpu_report below.

# The programs gpu_figures runs, relative to the build folder (each one's target is its name).
GPU_FIGURE_PROGRAMS=(benchmarks/gpu/bench_gpu examples/tp_transformer examples/train_tp_transformer
                     benchmarks/compile/bench_compile_cuda_graph)

# The environment of every run below (the CPU suite of bench_gpu.sh too).
gpu_env() { export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DTENSOR_COLLECTIVE_TIMEOUT=120; }

# gpu_suite BUILD RESULTS [ctest arguments]: the gpu label with output on failure, its log in
# RESULTS/suite.log and its summary lines in RESULTS/suite.txt (what the report shows). Returns
# ctest's status.
gpu_suite() {
  local build=$1 results=$2 rc
  shift 2
  gpu_env
  (cd "$build" && ctest -L gpu --output-on-failure "$@") 2>&1 | tee "$results/suite.log"
  rc=${PIPESTATUS[0]}
  grep -E "tests passed|Test +#" "$results/suite.log" | sed 's/ \{2,\}/ /g' > "$results/suite.txt" ||
    true
  # On a machine whose GPU nvidia-smi sees, a gpu test that reports skipped (exit 77: no usable
  # device, e.g. a driver / runtime mismatch) checked nothing: count it a failure, not a pass.
  if [ "$rc" = 0 ] && nvidia-smi -L >/dev/null 2>&1 && grep -q "Skipped" "$results/suite.log"; then
    echo "gpu suite: a GPU is visible but some gpu tests reported skipped: failing" |
      tee -a "$results/suite.log"
    rc=1
  fi
  return "$rc"
}

# gpu_figures BUILD RESULTS MPIRUN...: bench_gpu on one rank (RESULTS/gpu.jsonl), bench_gpu
# --redistribute on 2 ranks sharing the GPU (gpu_redist.jsonl), a compiled step's eager vs replay
# vs CUDA-graph replay step times on one rank (compile_cuda_graph.jsonl, issue 42 item 6; its
# failure does not stop the rest) and the examples on the CPU and with --cuda (examples.log), the
# programs taken from BUILD (GPU_FIGURE_PROGRAMS' layout), the ranks started by MPIRUN... (e.g.
# mpirun --allow-run-as-root --oversubscribe --bind-to none).
gpu_figures() {
  local B=$1 RESULTS=$2
  shift 2
  local MPI=("$@")
  (cd "$RESULTS" && rm -f gpu.jsonl gpu_redist.jsonl compile_cuda_graph.jsonl examples.log)
  gpu_env

  echo "== bench_gpu"
  "$B/benchmarks/gpu/bench_gpu" --json "$RESULTS/gpu.jsonl"
  DTENSOR_CUDA_BACKEND=mpi "${MPI[@]}" -np 2 -x DTENSOR_CUDA_BACKEND "$B/benchmarks/gpu/bench_gpu" \
    --redistribute --json "$RESULTS/gpu_redist.jsonl"

  echo "== bench_compile_cuda_graph"
  "${MPI[@]}" -np 1 "$B/benchmarks/compile/bench_compile_cuda_graph" \
    --json "$RESULTS/compile_cuda_graph.jsonl" || echo "bench_compile_cuda_graph failed: status $?"

  echo "== examples"
  local TP_ARGS=(--layers 2 --dim 512 --heads 8 --seq 256 --batch 4 --hidden 2048 --vocab 4096
                 --iters 10)
  local TRAIN=(grep -E "final loss|relative|mean step")
  {
    for dev in "" --cuda; do
      echo "# tp_transformer, 1 rank, ${dev:-CPU (OPENBLAS_NUM_THREADS=16)}"
      "${MPI[@]}" -np 1 -x OPENBLAS_NUM_THREADS=16 "$B/examples/tp_transformer" "${TP_ARGS[@]}" $dev |
        grep -E "forward time|max \|"
      echo "# train_tp_transformer, 1 rank, ${dev:-CPU}"
      "${MPI[@]}" -np 1 "$B/examples/train_tp_transformer" $dev | "${TRAIN[@]}"
    done
    export DTENSOR_CUDA_BACKEND=mpi
    echo "# train_tp_transformer --cuda, 2 ranks sharing the GPU (DTENSOR_CUDA_BACKEND=mpi)"
    "${MPI[@]}" -np 2 -x DTENSOR_CUDA_BACKEND "$B/examples/train_tp_transformer" --cuda | "${TRAIN[@]}"
    echo "# train_tp_transformer --cuda --dp 2, 4 ranks sharing the GPU (DTENSOR_CUDA_BACKEND=mpi)"
    "${MPI[@]}" -np 4 -x DTENSOR_CUDA_BACKEND "$B/examples/train_tp_transformer" --cuda --dp 2 |
      "${TRAIN[@]}"
    unset DTENSOR_CUDA_BACKEND
  } | tee "$RESULTS/examples.log"
}

# gpu_report RESULTS ARCH COMMAND [gpu_report.py arguments, e.g. --out docs/PERFORMANCE.md]:
# prints the "GPU (CUDA)" section from RESULTS (the machine read from nvidia-smi).
gpu_report() {
  local results=$1 arch=$2 command=$3 gpu
  shift 3
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
  python3 "$(dirname "${BASH_SOURCE[0]}")/../benchmarks/gpu/gpu_report.py" --results "$results" \
    --date "$(date -u +%Y-%m-%d)" --machine "$(nproc) CPU cores, nvidia-smi: $gpu" \
    --arch "$arch" --command "$command" "$@"
}

# Sourced: the definitions above only.
[[ "${BASH_SOURCE[0]}" != "$0" ]] && return 0

set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build-gpu}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
RESULTS=${RESULTS:-$BUILD_DIR/benchmarks/results/gpu}
DOC=""
[ "${1:-}" = "--doc" ] && DOC=docs/PERFORMANCE.md
command -v nvidia-smi >/dev/null || { echo "bench_gpu.sh: no nvidia-smi: run it on a GPU machine" >&2; exit 2; }

bash "$ROOT/scripts/install_deps.sh"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DDTENSOR_CUDA=ON \
  -DDTENSOR_BUILD_TESTS=ON >/dev/null
# Everything: the gpu label spans several test programs (tensor, collectives, rng, ops, DTensor).
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
mkdir -p "$RESULTS"
(cd "$RESULTS" && rm -f suite.log suite.txt)
arch=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
B="$BUILD_DIR"

echo "== gpu suite"
gpu_suite "$B" "$RESULTS"
echo "CPU suite of the same build on $(nproc) cores:" >> "$RESULTS/suite.txt"
(cd "$B" && ctest -j "$(nproc)" -LE gpu -E 'build_warnings|install_consumer') | tee "$RESULTS/cpu_suite.log" |
  grep -E "tests passed|Total Test time" >> "$RESULTS/suite.txt" || true

gpu_figures "$B" "$RESULTS" mpirun --allow-run-as-root --oversubscribe --bind-to none

gpu_report "$RESULTS" "$arch" "scripts/bench_gpu.sh${DOC:+ --doc}" ${DOC:+--out "$DOC"}
