#!/usr/bin/env bash
# The figures of docs/PERFORMANCE.md's "Models and the other parallelisms" section (issues 43, 45,
# 46): the Llama beside transformers (paired runs), its tensor-parallel scaling, the pipeline
# schedules' bubbles and memory, ring attention against gathering k/v, planning cost against mesh
# size and a large dry run beside its analytic collective bytes. Builds the bench targets
# (scripts/build.sh, BUILD_TARGETS), runs them one thread per rank with OPENBLAS_CORETYPE unset
# (dtensor picks the GEMM core; the section records which), writes every program's JSON lines
# and logs under <build>/benchmarks/results/models/, and prints the section
# (benchmarks/models/models_report.py).
#
#   scripts/bench_models.sh          # prints the section (~6 minutes on 2 quiet cores)
#   scripts/bench_models.sh --doc    # and rewrites it in docs/PERFORMANCE.md between
#                                    # <!-- models:begin and <!-- models:end -->
#                                    # (scripts/bench.sh runs this last; MODELS=0 there
#                                    # skips it and keeps the section)
#
# Order: the 1-rank transformers pairs, the pipeline, TP scaling, ring attention, planning scale,
# the dry run (most wanted first, should a run have to be cut short). The load average is
# recorded before and after each table; measure on a quiet machine (1-minute load below 1).
#
# Environment (defaults in brackets):
#   BUILD_DIR [build]       scripts/build.sh's folder (relative to the repo root or absolute)
#   BUILD_LOCK []           a file: the build step runs under `flock BUILD_LOCK` (shared machines)
#   SKIP_BUILD [0]          1: use the binaries as built
#   DOC [docs/PERFORMANCE.md]  the file --doc rewrites
#   TORCH_PYTHON [/root/venv/bin/python]  a python with torch and transformers (the Llama's
#                           comparison)
#   PAIRS [5]               counted ours/theirs pairs per config (after 1 warm-up pair)
#   ITERS [10]              timed runs inside each process (after 2 warm-ups)
#   CONFIGS ["tiny medium"] bench_llama configs
#   TP_RANKS ["2 4"]        tensor-parallel sizes, each paired with tp 1; TP_PAIRS [4] pairs
#   PP_RANKS ["2 4"]        pipeline sizes; PP_ITERS [20] steps per schedule
#   CP_RANKS ["2 4"]        ring-attention sizes; CP_RUNS [5] processes each; CP_ITERS [5]
#   SETTLE [120; 0 with SMOKE=1] before each table, wait up to this many seconds for the 1-minute
#                           load to fall below 1 (the previous table's own ranks raise it, so
#                           without the wait every later table reads "load above 1"); 0: no wait
#   SMOKE [0]               1: one pair, few iterations, small sizes (checks the script; the
#                           figures are throwaway)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
PAIRS=${PAIRS:-5}
ITERS=${ITERS:-10}
CONFIGS=${CONFIGS:-"tiny medium"}
TP_RANKS=${TP_RANKS:-"2 4"}
TP_PAIRS=${TP_PAIRS:-4}
PP_RANKS=${PP_RANKS:-"2 4"}
PP_ITERS=${PP_ITERS:-20}
CP_RANKS=${CP_RANKS:-"2 4"}
CP_RUNS=${CP_RUNS:-5}
CP_ITERS=${CP_ITERS:-5}
SMOKE=${SMOKE:-0}
SETTLE=${SETTLE:-$([ "$SMOKE" = 1 ] && echo 0 || echo 120)}
PY=${TORCH_PYTHON:-/root/venv/bin/python}
OUT=""
[ "${1:-}" = "--doc" ] && OUT=${DOC:-docs/PERFORMANCE.md}
case "$OUT" in "" | /*) ;; *) OUT="$ROOT/$OUT" ;; esac
# The pipeline's model (the doc's protocol): 8 TransformerBlocks of dim 128, microbatches 2 x 64.
PP_ARGS="--dim 128 --seq 64 --microbatch 2"
PLAN_ARGS="--min-seconds 0.05"
RING_ARGS=""
if [ "$SMOKE" = 1 ]; then
  PAIRS=1 ITERS=2 TP_PAIRS=1 PP_ITERS=2 CP_RUNS=1 CP_ITERS=1
  PP_ARGS="--dim 64 --seq 16 --microbatch 1"
  PLAN_ARGS="--min-seconds 0.001 --max-world 512"
  RING_ARGS="--seq 256"
fi
# The dry run: Llama 3 70B's shape, FSDP over 1,024 ranks on meta tensors (no data, no kernels).
DRY_ARGS="--world 1024 --rank 0 --mesh 1024 --dims dp --meta --hidden 8192 --layers 80 --heads 64"
DRY_ARGS="$DRY_ARGS --kv-heads 8 --intermediate 28672 --vocab 128256 --batch 1 --seq 128"

TARGETS="bench_llama bench_pipeline bench_ring_attention bench_planning_scale dry_run"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  build=(env BUILD_DIR="$BUILD_DIR" BUILD_TARGETS="$TARGETS" ./scripts/build.sh)
  [ -n "${BUILD_LOCK:-}" ] && build=(flock "$BUILD_LOCK" "${build[@]}")
  "${build[@]}" >/dev/null
fi

RES="$BUILD_DIR/benchmarks/results/models"
rm -rf "$RES"
mkdir -p "$RES"
# One compute thread per rank; dtensor chooses the GEMM core itself (OPENBLAS_CORETYPE unset).
unset OPENBLAS_CORETYPE
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 DTENSOR_COLLECTIVE_TIMEOUT=600
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
--mca btl_vader_single_copy_mechanism none"
B="$BUILD_DIR/benchmarks"
LLAMA="$B/models/bench_llama"
LLAMA_TORCH="$ROOT/benchmarks/models/bench_llama_torch.py"

# The machine and both sides' GEMM libraries (the report's header).
{
  echo "date $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "cores $(getconf _NPROCESSORS_ONLN)"  # not nproc: it obeys OMP_NUM_THREADS
  echo "mem_gib $(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)"
  echo "flags $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "torch $("$PY" -c "import torch, re, transformers; c = torch.__config__.show(); \
m = re.search(r'BLAS_INFO=(\w+)', c); print('transformers ' + transformers.__version__ + \
', PyTorch ' + torch.__version__ + ' (CPU, BLAS: ' + (m.group(1) if m else '?') + ')')" \
    2>/dev/null || echo '?')"
} >"$RES/machine.txt"

# section NAME begin|end: the UTC time and load average (1, 5, 15 minutes) at a table's start
# and end.
# A table's begin first waits (up to SETTLE seconds) for the load its predecessor left to decay:
# the 1-minute average falls by about 1/e a minute, so a 2-core machine left at 2 reads below 1
# after ~45 s. The load recorded is the one the table starts at, wait or not.
settle() {
  local waited=0
  while [ "$waited" -lt "$SETTLE" ] && awk '{ exit !($1 >= 1.0) }' /proc/loadavg; do
    sleep 5
    waited=$((waited + 5))
  done
  [ "$waited" = 0 ] || echo "# waited ${waited} s for the load to fall below 1" >&2
}
section() {
  [ "$2" = begin ] && settle
  echo "$1 $2 $(date -u +%H:%M) $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/loads.txt"
}
# cmd SECTION LINE: the command line as the report prints it (repo-relative paths).
cmd() {
  echo "$1 $(echo "$2" | sed "s|$ROOT/||g; s|$PY|/root/venv/bin/python|g")" >>"$RES/commands.txt"
}
# run LOG CMD...: one program; its output in LOG; a failure is recorded and the run goes on.
run() {
  local log=$1 status=0
  shift
  "$@" >"$log" 2>&1 || status=$?
  if [ "$status" != 0 ]; then
    echo "${log#"$RES"/}: exit status $status: $*" | tee -a "$RES/failures.txt" >&2
  fi
  grep -v 'Loading weights\|^\[' "$log" | sed "s/^/  /" >&2 || true
}
ENVP="env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1"

# 1. One rank beside transformers: whole processes alternately, ours then theirs, 1 warm-up pair
# (p0, not counted) then PAIRS counted pairs per config.
section llama begin
for c in $CONFIGS; do
  cmd llama "$ENVP $LLAMA --config $c --iters $ITERS --json FILE"
  cmd llama "$ENVP $PY $LLAMA_TORCH --config $c --iters $ITERS --json FILE"
  for p in $(seq 0 "$PAIRS"); do
    echo "# llama $c pair $p of $PAIRS" >&2
    run "$RES/ours.$c.p$p.log" "$LLAMA" --config "$c" --iters "$ITERS" \
      --json "$RES/ours.$c.p$p.jsonl"
    run "$RES/torch.$c.p$p.log" "$PY" "$LLAMA_TORCH" --config "$c" --iters "$ITERS" \
      --json "$RES/torch.$c.p$p.jsonl"
  done
done
section llama end

# 2. Pipeline schedules at each pp (one process group runs every schedule and m).
section pipeline begin
for n in $PP_RANKS; do
  cmd pipeline "$ENVP $MPIRUN -np $n $B/pipeline/bench_pipeline $PP_ARGS --iters $PP_ITERS \
--json FILE"
  echo "# pipeline pp $n" >&2
  # shellcheck disable=SC2086
  run "$RES/pp$n.log" $MPIRUN -np "$n" "$B/pipeline/bench_pipeline" $PP_ARGS --iters "$PP_ITERS" \
    --json "$RES/pp$n.jsonl"
done
section pipeline end

# 3. Tensor-parallel scaling: tp N then tp 1, TP_PAIRS pairs per (config, N); speedup per pair.
section tp begin
for c in $CONFIGS; do
  for n in $TP_RANKS; do
    cmd tp "$ENVP $MPIRUN -np $n $LLAMA --config $c --iters $ITERS --json FILE"
    for p in $(seq 1 "$TP_PAIRS"); do
      echo "# tp $n vs 1, $c, pair $p of $TP_PAIRS" >&2
      # shellcheck disable=SC2086
      run "$RES/tp$n.$c.p$p.log" $MPIRUN -np "$n" "$LLAMA" --config "$c" --iters "$ITERS" \
        --json "$RES/tp$n.$c.p$p.jsonl"
      run "$RES/tp1for$n.$c.p$p.log" "$LLAMA" --config "$c" --iters "$ITERS" \
        --json "$RES/tp1for$n.$c.p$p.jsonl"
    done
  done
done
section tp end

# 4. Ring attention against all-gather-then-attend, CP_RUNS processes per cp size.
section ring begin
for n in $CP_RANKS; do
  cmd ring "$ENVP $MPIRUN -np $n $B/context_parallel/bench_ring_attention $RING_ARGS \
--iters $CP_ITERS --json FILE"
  for r in $(seq 1 "$CP_RUNS"); do
    echo "# ring attention cp $n run $r of $CP_RUNS" >&2
    # shellcheck disable=SC2086
    run "$RES/ring.cp$n.r$r.log" $MPIRUN -np "$n" "$B/context_parallel/bench_ring_attention" \
      $RING_ARGS --iters "$CP_ITERS" --json "$RES/ring.cp$n.r$r.jsonl"
  done
done
section ring end

# 5. Planning against mesh size (fake backend, one process).
section planning begin
cmd planning "$B/planning_scale/bench_planning_scale $PLAN_ARGS --json FILE"
echo "# planning scale" >&2
# shellcheck disable=SC2086
run "$RES/planning.log" "$B/planning_scale/bench_planning_scale" $PLAN_ARGS \
  --json "$RES/planning.jsonl"
section planning end

# 6. The dry run of one large layout (its report is text; the report script parses it).
section dryrun begin
cmd dryrun "$BUILD_DIR/examples/dry_run $DRY_ARGS"
echo "# dry run" >&2
# shellcheck disable=SC2086
run "$RES/dryrun.log" "$BUILD_DIR/examples/dry_run" $DRY_ARGS
echo "$DRY_ARGS" >"$RES/dryrun.args"
section dryrun end

ENV_DESC="PAIRS=$PAIRS ITERS=$ITERS TP_PAIRS=$TP_PAIRS PP_ITERS=$PP_ITERS CP_RUNS=$CP_RUNS"
[ "$SMOKE" = 1 ] && ENV_DESC="SMOKE=1"
python3 "$ROOT/benchmarks/models/models_report.py" --results "$RES" \
  --command "$ENV_DESC scripts/bench_models.sh --doc" ${OUT:+--out "$OUT"}
[ ! -s "$RES/failures.txt" ]
