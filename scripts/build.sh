#!/usr/bin/env bash
# Configures and builds dtensor in ./build (Release). Extra arguments go to cmake's configure
# step, e.g. scripts/build.sh -DDTENSOR_CUDA=OFF. BUILD_DIR overrides the folder; BUILD_TARGETS
# (space-separated) builds only those targets.
# The build's output is also kept in <build dir>/build.log, started afresh when the folder is
# configured for the first time and appended to by later runs (the README's main command builds
# part of the tree, the test command the rest): the ctest entry build_warnings
# (scripts/check_warnings.sh) fails when it holds a compiler warning, so on a fresh clone the
# test command checks that the whole build was quiet. Delete the log to start it again.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
if [ ! -f "$build_dir/CMakeCache.txt" ]; then rm -f "$build_dir/build.log"; fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" >/dev/null
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS} 2>&1 |
  tee -a "$build_dir/build.log"
