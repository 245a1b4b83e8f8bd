#!/bin/sh
# Usage: race.sh TOOL DIR NP VERSIONS -- <mpirun command...>
# A load running while another job replaces the same checkpoint (docs/CHECKPOINT.md): saves
# version 1, then runs `TOOL race-save DIR` (a save after another, until DIR.stop exists) and
# `TOOL race-load DIR VERSIONS` (loads until it loaded VERSIONS of the saver's versions) as two
# concurrent jobs of NP ranks each. Passes when every load gave one version whole or raised
# "being replaced", and both jobs exited 0.
tool=$1 dir=$2 np=$3 versions=$4
shift 4
[ "$1" = "--" ] || { echo "race.sh: missing -- before the mpirun command"; exit 2; }
shift
rm -rf "$dir" "$dir.tmp" "$dir.old" "$dir.stop"
"$@" -np "$np" "$tool" race-save "$dir" 1 || exit 1
"$@" -np "$np" "$tool" race-save "$dir" 100000 &
saver=$!
"$@" -np "$np" "$tool" race-load "$dir" "$versions"
loader_rc=$?
touch "$dir.stop"
wait "$saver"
saver_rc=$?
rm -f "$dir.stop"
echo "race.sh: loader exit $loader_rc, saver exit $saver_rc"
[ "$loader_rc" -eq 0 ] && [ "$saver_rc" -eq 0 ]
