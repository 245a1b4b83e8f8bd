#!/usr/bin/env bash
# Fails when an object (or a linked library / program) in a build folder was built with a compiler
# warning; prints them. The release build is meant to be silent with -Wall -Wextra (a known
# compiler false positive is silenced at its spot, with a comment saying why). Run by the ctest
# entry build_warnings.
#
# Every compile and link runs through cmake/record_diagnostics.sh, which keeps what it printed in
# <output>.diag beside the output, rewritten when the output is rebuilt. This script reads the
# record of every output that exists, so it covers every object in the folder whoever built it
# (scripts/build.sh, scripts/run_example.sh, a plain cmake --build), and a fixed warning goes away
# when its object is rebuilt. Objects built before the launcher existed have no record: they are
# counted (not checked) until rebuilt. Nested CMake builds (the install consumer's) are not ours
# and are skipped. Exits 77 (ctest: skipped) when the folder holds no record at all.
#   scripts/check_warnings.sh <build dir>   (a file path stands for the folder it is in)
set -uo pipefail
dir=${1:?usage: check_warnings.sh <build dir>}
[ -d "$dir" ] || dir=$(dirname "$dir")
# GCC / Clang / ld ("warning:"), cicc ("warning #177-D:"), nvcc / ptxas ("nvcc warning :").
pattern='warning( #[0-9A-Za-z-]+)?:|[a-z] warning :'

# CMake's own probes (compiler identification, try_compile) are not ours either.
prune=(-name CMakeScratch -o -name CMakeTmp -o -path '*/CMakeFiles/[0-9]*')
while IFS= read -r nested; do
  prune+=(-o -path "$nested")
done < <(find "$dir" -mindepth 2 -name CMakeCache.txt -printf '%h\n')

records=0
unrecorded=0
noisy=()
while IFS= read -r -d '' f; do
  case "$f" in
    *.diag)
      out=${f%.diag}
      [ -e "$out" ] || continue # a record whose output is gone (failed compile, removed source)
      records=$((records + 1))
      if grep -qE "$pattern" "$f"; then noisy+=("$f"); fi
      ;;
    *.o)
      [ -e "$f.diag" ] || unrecorded=$((unrecorded + 1))
      ;;
  esac
done < <(find "$dir" \( "${prune[@]}" \) -prune -o -type f \( -name '*.diag' -o -name '*.o' \) -print0)

if [ "$records" -eq 0 ]; then
  echo "check_warnings: no diagnostics records in $dir (build it after cmake/record_diagnostics.sh" \
    "became the launcher)"
  exit 77
fi
if [ "$unrecorded" -ne 0 ]; then
  echo "check_warnings: $unrecorded object(s) in $dir were built before the launcher recorded" \
    "diagnostics and are not checked until rebuilt"
fi
if [ "${#noisy[@]}" -ne 0 ]; then
  n=$(cat "${noisy[@]}" | grep -cE "$pattern")
  echo "check_warnings: $n compiler warning(s) in ${#noisy[@]} of $records outputs in $dir:"
  for f in "${noisy[@]}"; do
    echo "== ${f%.diag}"
    grep -E -B4 -A4 "$pattern" "$f"
  done
  exit 1
fi
echo "check_warnings: no compiler warnings in the $records recorded outputs in $dir"
