#!/bin/sh
# test_dry_run_agreement.sh BINARY DIR NP LAYOUT MPIEXEC...: the real run of LAYOUT (see
# test_dry_run_agreement.cc) at NP ranks writes each rank's report into DIR, then the fake backend
# replays each rank, with data and on meta tensors, and compares (exit 1 on a difference).
set -e
bin=$1; dir=$2; np=$3; layout=$4; shift 4
rm -rf "$dir"
mkdir -p "$dir"
"$@" -np "$np" "$bin" --write "$dir" "$layout"
r=0
while [ "$r" -lt "$np" ]; do
  DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=$np DTENSOR_FAKE_RANK=$r "$bin" --compare "$dir" "$layout"
  DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=$np DTENSOR_FAKE_RANK=$r "$bin" --compare-meta "$dir" "$layout"
  r=$((r + 1))
done
