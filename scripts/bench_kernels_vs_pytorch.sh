#!/usr/bin/env bash
# Local CPU kernels against PyTorch, one thread each (softmax, log_softmax, layer_norm, rms_norm,
# gelu, silu, exp and the softmax / layer_norm backward kernels, float32): runs
# benchmarks/kernels/bench_kernels and the same shapes under PyTorch's CPU build, case by case
# alternately (ours, then PyTorch's, so both see the same machine load) for ROUNDS rounds, and
# prints ours, PyTorch's and the ratio. Optional, not part of the test
# command: PyTorch goes into a virtual environment OUTSIDE the repository (created on first use
# from download.pytorch.org's CPU wheels, or PyPI's torch when that index is unreachable).
#
#   scripts/bench_kernels_vs_pytorch.sh          # prints the table
#   scripts/bench_kernels_vs_pytorch.sh --doc    # and rewrites docs/KERNELS.md
#
# Environment (defaults in brackets): BUILD_DIR [build-bench], TORCH_VENV
# [/tmp/dtensor-torch-venv], ROUNDS [3], MIN_SECONDS [0.5] per case and round, JOBS [2].
# Measure on a quiet machine: the load average is recorded; rerun when it is above 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build-bench}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
TORCH_VENV=${TORCH_VENV:-/tmp/dtensor-torch-venv}
ROUNDS=${ROUNDS:-3}
MIN_SECONDS=${MIN_SECONDS:-0.5}
DOC=""
[ "${1:-}" = "--doc" ] && DOC=docs/KERNELS.md

PY="$TORCH_VENV/bin/python"
# shellcheck source=scripts/torch_venv.sh
. "$ROOT/scripts/torch_venv.sh"
ensure_torch_venv bench_kernels_vs_pytorch

cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DDTENSOR_CUDA=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target bench_kernels >/dev/null
RES="$BUILD_DIR/benchmarks/results"
mkdir -p "$RES"
rm -f "$RES"/kernels_*.jsonl "$RES/kernels_commands.txt"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OURS=(benchmarks/kernels/bench_kernels --min-seconds "$MIN_SECONDS")
TORCH=(benchmarks/kernels/bench_kernels_torch.py --min-seconds "$MIN_SECONDS")
{
  echo "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 ${BUILD_DIR#"$ROOT"/}/${OURS[*]}" \
    "--only CASE --json kernels_ours.rN.CASE.jsonl"
  echo "OMP_NUM_THREADS=1 \$TORCH_VENV/bin/python ${TORCH[*]} --only CASE" \
    "--json kernels_torch.rN.CASE.jsonl"
} >"$RES/kernels_commands.txt"

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$ROUNDS"); do
  for c in $("$BUILD_DIR/${OURS[0]}" --list); do
    echo "# round $r of $ROUNDS: $c" >&2
    "$BUILD_DIR/${OURS[0]}" "${OURS[@]:1}" --only "$c" --json "$RES/kernels_ours.r$r.$c.jsonl" |
      grep -v '^#' | tail -n +2 | sed 's/^/  ours   /' >&2
    "$PY" "$ROOT/${TORCH[0]}" "${TORCH[@]:1}" --only "$c" \
      --json "$RES/kernels_torch.r$r.$c.jsonl" 2>/dev/null | sed 's/^/  torch  /' >&2
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
"$BUILD_DIR/${OURS[0]}" --gemm-info >"$RES/kernels_gemm.txt"
echo "# load average before: $LOAD_BEFORE; after: $LOAD_AFTER" >&2

python3 "$ROOT/benchmarks/kernels/kernels_report.py" --results "$RES" \
  --load-before "$LOAD_BEFORE" --load-after "$LOAD_AFTER" \
  --command "ROUNDS=$ROUNDS MIN_SECONDS=$MIN_SECONDS scripts/bench_kernels_vs_pytorch.sh --doc" \
  ${DOC:+--out "$ROOT/$DOC"}
