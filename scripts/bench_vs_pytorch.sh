#!/usr/bin/env bash
# The distributed benchmarks beside PyTorch DTensor (gloo backend, CPU): per-op dispatch
# overhead, redistribute, the tensor-parallel transformer block forward and the tensor-parallel
# training step. Runs ours (benchmarks/{dispatch,redistribute,transformer,train}, MPI) and the
# same workloads written against PyTorch's public API (benchmarks/pytorch/*_torch.py, launched by
# torchrun), workload by workload alternately (ours first in odd rounds, PyTorch's first in even
# ones, so drifting machine load hits both alike), for ROUNDS rounds, one compute thread per
# rank; prints ours, PyTorch's and the ratio. Optional, not part of the test command: PyTorch goes
# into a virtual environment OUTSIDE the repository (created on first use from
# download.pytorch.org's CPU wheels, or PyPI's torch when that index is unreachable).
#
#   scripts/bench_vs_pytorch.sh          # prints the tables (one round took 473 s on 2 cores
#                                        # under a load average of 8-16; estimated ~2 min a
#                                        # round on quiet cores, most of it PyTorch's start-up)
#   scripts/bench_vs_pytorch.sh --doc    # and rewrites the "PyTorch DTensor side by side"
#                                        # section of docs/PERFORMANCE.md (scripts/bench.sh
#                                        # keeps that section when it regenerates the file)
#
# Environment (defaults in brackets): BUILD_DIR [build-bench], TORCH_VENV
# [/tmp/dtensor-torch-venv], ROUNDS [2], TP_RANKS ["1 2 4"] (bench_tp and bench_train), NP [4]
# (redistribute; the 2x2 mesh cases need 4), REDIST_MIN_BYTES [1048576], REDIST_MAX_BYTES
# [16777216], WORKLOADS ["dispatch redistribute tp train"], JOBS [2], SMOKE [0] (1: tiny sizes,
# one round: checks that everything runs, figures meaningless).
# Measure on a quiet machine: the load average is recorded; rerun when it is above 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build-bench}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
TORCH_VENV=${TORCH_VENV:-/tmp/dtensor-torch-venv}
ROUNDS=${ROUNDS:-2}
TP_RANKS=${TP_RANKS:-"1 2 4"}
NP=${NP:-4}
REDIST_MIN_BYTES=${REDIST_MIN_BYTES:-1048576}
REDIST_MAX_BYTES=${REDIST_MAX_BYTES:-16777216}
WORKLOADS=${WORKLOADS:-"dispatch redistribute tp train"}
SMOKE=${SMOKE:-0}
DOC=""
[ "${1:-}" = "--doc" ] && DOC=docs/PERFORMANCE.md

# Arguments of each workload, the same for ours and PyTorch's (both programs take these flags).
DISPATCH_ARGS="--min-seconds 0.1"
REDIST_ARGS="--min-bytes $REDIST_MIN_BYTES --max-bytes $REDIST_MAX_BYTES"
REDIST_ARGS="$REDIST_ARGS --budget 0.25 --max-iters 20"
TP_ARGS=""
TRAIN_ARGS=""
if [ "$SMOKE" = 1 ]; then
  ROUNDS=1
  DISPATCH_ARGS="--min-seconds 0.001"
  REDIST_ARGS="--min-bytes 65536 --max-bytes 65536 --iters 2"
  TP_ARGS="--dim 64 --heads 4 --seq 16 --batch 2 --iters 2"
  TRAIN_ARGS="--dim 32 --layers 2 --tokens 16 --iters 2"
fi

# shellcheck source=scripts/torch_venv.sh
. "$ROOT/scripts/torch_venv.sh"
ensure_torch_venv bench_vs_pytorch

cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DDTENSOR_CUDA=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" \
  --target bench_dispatch bench_redistribute bench_tp bench_train >/dev/null
RES="$BUILD_DIR/benchmarks/results/vs_pytorch"
rm -rf "$RES"
mkdir -p "$RES"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 DTENSOR_COLLECTIVE_TIMEOUT=600
# What each side's GEMMs run on (the report's header): ours from bench_kernels --gemm-info,
# PyTorch's from its build configuration's BLAS line.
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target bench_kernels >/dev/null
"$BUILD_DIR/benchmarks/kernels/bench_kernels" --gemm-info >"$RES/kernels_gemm.txt"
"$TORCH_VENV/bin/python" -c "import torch, re; c = torch.__config__.show(); \
m = re.search(r'BLAS_INFO=(\w+)', c); print((m.group(1) if m else '?') + ', oneDNN ' + \
str(torch.backends.mkldnn.is_available()) + ', CPU capability ' + \
torch.backends.cpu.get_cpu_capability())" >"$RES/torch_blas.txt" 2>/dev/null || true
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
--mca btl_vader_single_copy_mechanism none"
TORCHRUN="$TORCH_VENV/bin/torchrun --standalone"
B="$BUILD_DIR/benchmarks"
P="$ROOT/benchmarks/pytorch"

# The two command lines of a workload at N ranks (word-split on purpose), "" when not run.
ours_cmd() {
  case "$1" in
    dispatch) echo "$B/dispatch/bench_dispatch $DISPATCH_ARGS" ;;
    redistribute) echo "$MPIRUN -np $2 $B/redistribute/bench_redistribute $REDIST_ARGS" ;;
    tp) echo "$MPIRUN -np $2 $B/transformer/bench_tp $TP_ARGS" ;;
    train) echo "$MPIRUN -np $2 $B/train/bench_train $TRAIN_ARGS" ;;
  esac
}
torch_cmd() {
  case "$1" in
    dispatch) echo "$TORCHRUN --nproc-per-node 1 $P/bench_dispatch_torch.py $DISPATCH_ARGS" ;;
    redistribute)
      echo "$TORCHRUN --nproc-per-node $2 $P/bench_redistribute_torch.py $REDIST_ARGS" ;;
    tp) echo "$TORCHRUN --nproc-per-node $2 $P/bench_tp_torch.py $TP_ARGS" ;;
    train) echo "$TORCHRUN --nproc-per-node $2 $P/bench_train_torch.py $TRAIN_ARGS" ;;
  esac
}
ranks_of() {
  case "$1" in
    dispatch) echo 1 ;;
    redistribute) echo "$NP" ;;
    *) echo "$TP_RANKS" ;;
  esac
}

# run WHO WORKLOAD N ROUND: one program, its JSON lines in $RES/WHO.rROUND.WORKLOAD.npN.jsonl;
# stdout to the terminal (stderr), the log kept; a failure is recorded and the run goes on.
run() {
  local who=$1 w=$2 n=$3 r=$4 cmd status=0
  cmd=$("${who}_cmd" "$w" "$n")
  local json="$RES/$who.r$r.$w.np$n.jsonl" log="$RES/$who.r$r.$w.np$n.log"
  echo "# round $r of $ROUNDS: $who $w, $n rank(s)" >&2
  # shellcheck disable=SC2086
  $cmd --json "$json" >"$log" 2>&1 || status=$?
  if [ "$status" != 0 ]; then
    echo "$who $w np$n round $r: exit status $status (log: ${log#"$ROOT"/})" |
      tee -a "$RES/failures.txt" >&2
  fi
  grep -v '^#\|^\[rank\|Warning\|warn\|_conversion_method' "$log" | sed "s/^/  $who  /" >&2 || true
}

{
  for w in $WORKLOADS; do
    for n in $(ranks_of "$w"); do
      for who in ours torch; do
        "${who}_cmd" "$w" "$n" | sed "s|$ROOT/||g; s|$TORCH_VENV|\$TORCH_VENV|g; s|\$| --json FILE|"
      done
    done
  done
} >"$RES/commands.txt"

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)
for r in $(seq 1 "$ROUNDS"); do
  order="ours torch"
  [ $((r % 2)) = 0 ] && order="torch ours"
  for w in $WORKLOADS; do
    for n in $(ranks_of "$w"); do
      for who in $order; do run "$who" "$w" "$n" "$r"; done
    done
  done
done
T1=$(date +%s)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# load average before: $LOAD_BEFORE; after: $LOAD_AFTER; $((T1 - T0)) s" >&2

ENV_DESC="ROUNDS=$ROUNDS TP_RANKS=\"$TP_RANKS\" NP=$NP REDIST_MIN_BYTES=$REDIST_MIN_BYTES"
ENV_DESC="$ENV_DESC REDIST_MAX_BYTES=$REDIST_MAX_BYTES"
[ "$SMOKE" = 1 ] && ENV_DESC="SMOKE=1"
python3 "$P/vs_pytorch_report.py" --results "$RES" --rounds "$ROUNDS" \
  --load-before "$LOAD_BEFORE" --load-after "$LOAD_AFTER" --seconds "$((T1 - T0))" \
  --command "$ENV_DESC scripts/bench_vs_pytorch.sh --doc" ${DOC:+--out "$ROOT/$DOC"}
[ ! -s "$RES/failures.txt" ]
