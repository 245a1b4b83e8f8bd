#!/usr/bin/env bash
# Installs the built package into a temporary prefix and builds the out-of-tree consumer
# (tests/install/consumer: the README's first program) against it with a plain
# find_package(dtensor) project and no extra flags. The ctest fixture install_consumer runs it
# once; install_consumer.np1 / .np4 run the program.
#   build_consumer.sh <dtensor build dir> <consumer source dir> <work dir> <layers: a|b|c>
set -euo pipefail
build_dir=$1 src=$2 work=$3 layers=$4
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
# A clean environment for the consumer's compiler: no flags from the caller.
env -u CXXFLAGS -u CPPFLAGS -u LDFLAGS \
  cmake -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log"
cmake --build "$work/build" -j 2
test -x "$work/build/first_program"
