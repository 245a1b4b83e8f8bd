#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs the tensor-parallel
# transformer example on 4 ranks (mpirun, CPU; oversubscribed on small machines). It prints
# the plan, each rank's parameter shards, the collectives issued, the forward times and the
# max difference from the single-device output, and fails if they disagree.
# Extra arguments go to the example, e.g. scripts/run_example.sh --layers 4 --sp
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
# Only the example's target: the same build folder as the test command, options untouched.
BUILD_TARGETS=tp_transformer ./scripts/build.sh >/dev/null
ranks=${RANKS:-4}
exec mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
  --mca btl_vader_single_copy_mechanism none -x OPENBLAS_NUM_THREADS=1 -np "$ranks" \
  ./build/examples/tp_transformer "$@"
