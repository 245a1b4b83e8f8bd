#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs the Llama example
# (examples/llama.cc) on 4 ranks (mpirun, CPU; oversubscribed on small machines) on the committed
# tiny Hugging Face checkpoint (tests/data/tiny_llama): loaded onto a dp 2 x tp 2 mesh (tensor
# parallel over tp, FSDP over dp), a greedy generation, a few fine-tuning steps with activation
# checkpointing (a loss line per step), a greedy generation again, a saved Hugging Face
# directory. It fails unless the loaded model's loss and greedy tokens equal transformers'
# reference, the loss falls, the fine-tuned model continues the memorised sequences, and the
# saved directory reloads to the same logits.
# Extra arguments go to the example (--help lists them), e.g. scripts/run_example.sh --save out,
# or scripts/run_example.sh --compile: the fine-tuning steps from a compiled step
# (dtensor::compile), every loss checked equal to an eager twin's bit for bit.
# RUN_EXAMPLE=train_tp_transformer runs the second example instead (a transformer trained
# tensor-parallel from scratch, e.g. RUN_EXAMPLE=train_tp_transformer scripts/run_example.sh
# --compile); RANKS=n another rank count.
set -euo pipefail
cd "$(dirname "$0")/.."
example=${RUN_EXAMPLE:-llama}
case "$example" in
  llama | train_tp_transformer) ;;
  *)
    echo "run_example.sh: RUN_EXAMPLE=$example: expected llama or train_tp_transformer" >&2
    exit 2
    ;;
esac
./scripts/install_deps.sh
# Only the example's target: the same build folder as the test command, options untouched.
BUILD_TARGETS=$example ./scripts/build.sh >/dev/null
ranks=${RANKS:-4}
exec mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
  --mca btl_vader_single_copy_mechanism none -x OPENBLAS_NUM_THREADS=1 -np "$ranks" \
  "./build/examples/$example" "$@"
