#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and trains a small transformer
# tensor-parallel on 4 ranks (mpirun, CPU; oversubscribed on small machines) to copy random
# token sequences. It prints the plan, the collectives of one training step and a progress line
# (step, loss, step time) every few steps, and fails unless the loss falls below the threshold
# and the first steps' losses equal single-device training.
# Extra arguments go to the example (--help lists them), e.g. scripts/run_example.sh --steps 400
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
# Only the example's target: the same build folder as the test command, options untouched.
BUILD_TARGETS=train_tp_transformer ./scripts/build.sh >/dev/null
ranks=${RANKS:-4}
exec mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
  --mca btl_vader_single_copy_mechanism none -x OPENBLAS_NUM_THREADS=1 -np "$ranks" \
  ./build/examples/train_tp_transformer "$@"
