#!/usr/bin/env bash
# Configures and builds dtensor in ./build (Release). Extra arguments go to cmake's configure
# step, e.g. scripts/build.sh -DDTENSOR_CUDA=OFF. BUILD_DIR overrides the folder; BUILD_TARGETS
# (space-separated) builds only those targets.
# The build's output is also kept in <build dir>/build.log, which holds only this run's build: the
# ctest entry build_warnings (scripts/check_warnings.sh) fails when it holds a compiler warning,
# so it speaks of the last build alone (a warning an earlier, since-fixed build printed does not
# linger), and on a fresh clone the test command, which builds the whole tree, checks that the
# whole build was quiet. A file the last build did not recompile is not checked again.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" >/dev/null
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS} 2>&1 |
  tee "$build_dir/build.log"
