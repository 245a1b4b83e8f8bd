#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the whole test suite
# (ctest labels unit, mpi, gpu; GPU tests report "skipped" without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
./scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" "$@"
