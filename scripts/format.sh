#!/usr/bin/env bash
# Applies .clang-format (Debian's clang-format 14) to the C++ / CUDA sources named on the command
# line, or, with no argument, to every tracked one (the ctest entry format_check,
# tests/check_format.sh, fails when a file differs). Name your files when others are editing the
# tree: the whole-tree form rewrites their unfinished files too.
#   scripts/format.sh dtensor/ops/norm/norm.h tests/ops/test_x.cc   # just these
#   scripts/format.sh                                               # the whole tree
set -euo pipefail
fmt=$(command -v clang-format-14 || command -v clang-format)
if [ "$#" -gt 0 ]; then
  exec "$fmt" --style=file -i "$@"
fi
cd "$(dirname "$0")/.."
git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs "$fmt" --style=file -i
