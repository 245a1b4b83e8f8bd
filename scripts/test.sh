#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the whole test suite
# (ctest labels unit, mpi, gpu; GPU tests report "skipped" without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
# Tests and benchmarks on explicitly: the cache may hold OFF from an older configure.
./scripts/build.sh -DDTENSOR_BUILD_TESTS=ON -DDTENSOR_BUILD_BENCHMARKS=ON -DDTENSOR_BUILD_EXAMPLES=ON
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" "$@"
# Sanitizer configuration (ASan + UBSan: the unit tests and an mpi subset in ./build-asan, see
# docs/RELIABILITY.md). SANITIZE=0 skips it.
if [ "${SANITIZE:-1}" != 0 ]; then (cd - >/dev/null && ./scripts/sanitize.sh); fi
