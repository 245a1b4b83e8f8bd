#!/usr/bin/env bash
# Applies .clang-format to every C++ / CUDA source of the tree (the ctest entry format_check,
# tests/check_format.sh, fails when a file differs). Debian's clang-format 14.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format)
git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs "$fmt" --style=file -i
