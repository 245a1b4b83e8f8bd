#!/usr/bin/env bash
# Fails when a C++ / CUDA source of the tree differs from what .clang-format gives (issue 41
# item 7): run `scripts/format.sh` to apply it. Uses Debian's clang-format (installed by
# scripts/install_deps.sh); files whose formatting is data (generated reference tables) turn it
# off inside with `// clang-format off`.
#   check_format.sh <source root>
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$fmt" ]; then
  echo "check_format: clang-format not found (scripts/install_deps.sh installs it)" >&2
  exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')
else
  mapfile -t files < <(find dtensor tests benchmarks examples -name '*.h' -o -name '*.cc' \
                         -o -name '*.cu' -o -name '*.cuh' | sort)
fi
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
if [ ${#existing[@]} -eq 0 ]; then
  echo "check_format: no source file found under $root" >&2
  exit 1
fi
# One clang-format process per batch of files (one per file cost most of the entry's 27 s); its
# diagnostics start "<file>:<line>:<col>: error:", from which the differing files are taken.
# A failure that names no file (clang-format crashed or could not read a file) fails too.
out=$(printf '%s\0' "${existing[@]}" |
      xargs -0 -n 200 "$fmt" --style=file --dry-run --Werror 2>&1 >/dev/null)
rc=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: .*/\1/p' <<<"$out" | sort -u)
if [ $rc -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
  echo "check_format: clang-format failed (status $rc):" >&2
  printf '%s\n' "$out" | head -20 >&2
  exit 1
fi
echo "check_format: ${#files[@]} files checked with $("$fmt" --version | sed 's/.*version //')"
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) differ from .clang-format (run scripts/format.sh):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
