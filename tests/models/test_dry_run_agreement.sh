#!/bin/sh
# test_dry_run_agreement.sh BINARY DIR NP MPIEXEC...: the real run at NP ranks writes each rank's
# report into DIR, then the fake backend replays each rank, with data and on meta tensors, and
# compares (exit 1 on a difference).
set -e
bin=$1; dir=$2; np=$3; shift 3
rm -rf "$dir"
mkdir -p "$dir"
"$@" -np "$np" "$bin" --write "$dir"
r=0
while [ "$r" -lt "$np" ]; do
  DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=$np DTENSOR_FAKE_RANK=$r "$bin" --compare "$dir"
  DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=$np DTENSOR_FAKE_RANK=$r "$bin" --compare-meta "$dir"
  r=$((r + 1))
done
