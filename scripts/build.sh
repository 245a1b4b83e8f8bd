#!/usr/bin/env bash
# Configures and builds dtensor in ./build (Release). Extra arguments go to cmake's configure
# step, e.g. scripts/build.sh -DDTENSOR_CUDA=OFF. BUILD_DIR overrides the folder; BUILD_TARGETS
# (space-separated) builds only those targets.
# The build's output is also kept in <build dir>/build.log (this run's build only). The ctest
# entry build_warnings (scripts/check_warnings.sh) does not read it: every compile and link
# records its own diagnostics beside its output (cmake/record_diagnostics.sh, the launcher set
# in CMakeLists.txt), so the check covers every object in the folder, whichever command built it.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" >/dev/null
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS} 2>&1 |
  tee "$build_dir/build.log"
