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
  # Only C++ / CUDA files: clang-format would also "format" a Python script named with them
  # (it rewrote tests/ops/loss/torch_loss_references.py's comments once).
  files=()
  for f in "$@"; do
    case "$f" in
      *.h | *.cc | *.cu | *.cuh) files+=("$f") ;;
      *) echo "format.sh: skipping $f (not a C++ / CUDA source)" >&2 ;;
    esac
  done
  [ "${#files[@]}" -eq 0 ] || exec "$fmt" --style=file -i "${files[@]}"
  exit 0
fi
cd "$(dirname "$0")/.."
git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs "$fmt" --style=file -i
