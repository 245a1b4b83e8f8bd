#!/usr/bin/env bash
# Installs the built package into a temporary prefix and builds the out-of-tree consumer
# (tests/install/consumer: the README's programs, and examples/custom_op.cc compiled from its
# own path) against it with a plain find_package(dtensor) project and no extra flags. The ctest
# fixture install_consumer runs it once; install_consumer*.np1 / .np4 run the programs.
#   build_consumer.sh <dtensor build dir> <consumer source dir> <work dir> <layers: a|b|c>
#                     <examples dir> <README.md>
set -euo pipefail
build_dir=$1 src=$2 work=$3 layers=$4 examples=$5 readme=$6
# The README's C++ blocks, in order, are the consumer's programs: every line of block i appears
# in programs[i] (spacing aside: clang-format aligns the program's trailing comments its own way),
# so the README shows code that builds and runs.
programs=(first_program.cc training_program.cc)
blocks=$(grep -c '^```cpp' "$readme")
if [ "$blocks" -ne ${#programs[@]} ]; then
  echo "install_consumer: README.md shows $blocks C++ blocks, the consumer builds" \
    "${#programs[@]} (${programs[*]}): add a consumer program per block" >&2
  exit 1
fi
for i in "${!programs[@]}"; do
  missing=$(awk -v want=$((i + 1)) '/^```cpp/ {n++; inb = 1; next} /^```/ {inb = 0}
                                    inb && n == want' "$readme" | sed 's/^ *//; s/  */ /g' | grep -v '^$' |
            grep -vxF -f <(sed 's/^ *//; s/  */ /g' "$src/${programs[$i]}") || true)
  if [ -n "$missing" ]; then
    echo "install_consumer: README.md's C++ block $((i + 1)) has lines that" \
      "tests/install/consumer/${programs[$i]} lacks:" >&2
    echo "$missing" >&2
    exit 1
  fi
done
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >"$work/install.log"
# Consumers see only <dtensor/...> names: the prefix's include/ holds nothing else.
others=$(find "$work/prefix/include" -mindepth 1 -maxdepth 1 ! -name dtensor)
if [ -n "$others" ]; then
  echo "install_consumer: unexpected top-level include entries: $others" >&2
  exit 1
fi
# No installed header may use a short layer path ("tensor/...", "core/..."): every include names
# its file as installed, "dtensor/<layer>/x.h".
if grep -rnE "#include \"($layers)/" \
    "$work/prefix/include/dtensor"; then
  echo "install_consumer: installed headers above include short layer paths" >&2
  exit 1
fi
# Only public headers are installed: internal ones live in detail/ folders, which the install
# skips (cmake/DtensorInstall.cmake), and no installed header includes one.
details=$(find "$work/prefix/include" -type d -name detail)
if [ -n "$details" ]; then
  echo "install_consumer: internal detail/ folders were installed: $details" >&2
  exit 1
fi
if grep -rnE '#include [<"][^">]*detail/' "$work/prefix/include/dtensor"; then
  echo "install_consumer: installed headers above include internal detail/ headers" >&2
  exit 1
fi
# A clean environment for the consumer's compiler: no flags from the caller.
env -u CXXFLAGS -u CPPFLAGS -u LDFLAGS \
  cmake -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DDTENSOR_EXAMPLES_DIR="$examples" -DCMAKE_BUILD_TYPE=Release >"$work/configure.log"
cmake --build "$work/build" -j 2
for p in first_program training_program custom_op; do test -x "$work/build/$p"; done
