#!/usr/bin/env bash
# Configures and builds dtensor in ./build (Release). Extra arguments go to cmake's configure
# step, e.g. scripts/build.sh -DDTENSOR_CUDA=OFF. BUILD_DIR overrides the folder; BUILD_TARGETS
# (space-separated) builds only those targets.
# The build's output is also kept in <build dir>/build.log: the ctest entry build_warnings
# (scripts/check_warnings.sh) fails when it holds a compiler warning, so the test command
# checks that the build it just ran was quiet (on a fresh clone: the whole build).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" >/dev/null
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS} 2>&1 |
  tee "$build_dir/build.log"
