#!/usr/bin/env bash
# Compiler and linker launcher (CMAKE_<LANG>_COMPILER_LAUNCHER / CMAKE_CXX_LINKER_LAUNCHER, set
# in the top CMakeLists.txt): runs the command it is given and keeps what the command printed on
# stderr in <output>.diag beside its output file (the -o argument), rewritten on every run: empty
# when the compiler was quiet. The console still gets the same text. scripts/check_warnings.sh
# (ctest build_warnings) reads every record whose output file exists, so the check covers every
# object in the build folder, whoever built it (scripts/build.sh, scripts/run_example.sh, a plain
# cmake --build), and a warning goes away when its object is rebuilt without it.
#   record_diagnostics.sh <compiler> <arguments...>
out=""
prev=""
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then
    out=$arg
  fi
  prev=$arg
done
if [ -z "$out" ]; then
  exec "$@"
fi
case "$out" in */*) mkdir -p "${out%/*}" ;; esac
tmp="$out.diag.$$"
"$@" 2>"$tmp"
rc=$?
cat "$tmp" >&2
mv -f "$tmp" "$out.diag"
exit $rc
