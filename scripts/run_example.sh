#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, runs the example program.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
./scripts/build.sh -DDTENSOR_BUILD_TESTS=OFF -DDTENSOR_BUILD_BENCHMARKS=OFF
./build/examples/hello_tensor
