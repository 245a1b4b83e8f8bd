#!/usr/bin/env bash
# Fails when a build log holds a compiler warning; prints them. The release build is meant to
# be silent with -Wall -Wextra (a known compiler false positive is silenced at its spot, with a
# comment saying why). Run by the ctest entry build_warnings on <build dir>/build.log, which
# scripts/build.sh rewrites with each build's output (so only the last build counts); exits 77
# (ctest: skipped) when there is no log (a build made by plain cmake --build).
#   scripts/check_warnings.sh <build.log>
set -uo pipefail
log=${1:?usage: check_warnings.sh <build.log>}
if [ ! -f "$log" ]; then
  echo "check_warnings: no build log at $log (build with scripts/build.sh to record one)"
  exit 77
fi
n=$(grep -c 'warning:' "$log")
if [ "$n" -ne 0 ]; then
  echo "check_warnings: $n compiler warning(s) in $log:"
  grep -B4 -A4 'warning:' "$log"
  exit 1
fi
echo "check_warnings: no compiler warnings in $log"
