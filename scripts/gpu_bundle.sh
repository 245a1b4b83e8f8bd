#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run the gpu suite and the GPU figures without building:
# run here (no GPU needed), then carry .gpubundle to the device and run scripts/gpu_run.sh there
# (docs/guides/gpu_session.md). The device image (Ubuntu, CUDA 13, PyTorch's pip nvidia-* libraries)
# lacks our Debian dependencies and can fetch nothing, so the bundle holds:
#   - the gpu-labelled test programs and the programs scripts/bench_gpu.sh's figures run
#     (GPU_FIGURE_PROGRAMS), built here in a CUDA build folder, in the build folder's layout;
#   - the dtensor libraries and every other shared library they need (ldd, resolved here), plus
#     what the library loads itself (OpenBLAS, oneDNN), except glibc, libstdc++, libgcc and CUDA's
#     (libcuda, cudart, cuBLAS, cuBLASLt, NCCL: the device has them; gpu_run.sh finds them);
#   - Open MPI (mpirun = orterun, orted, the plugin tree, help files, the MCA parameter file) and
#     PMIx (library, plugins, help files), relocated by gpu_run.sh through the OPAL_* / PMIX_*
#     install-directory variables: Debian's Open MPI keeps sysconfdir outside its prefix, so
#     OPAL_PREFIX alone does not move it. Plugins needing UCX, libfabric, verbs, PSM or netlink are
#     left out (one node, shared memory; the parameter file excludes most of them anyway);
#   - gpu_tests.json: the gpu label as ctest lists it (--show-only=json-v1), paths rewritten to
#     @BUNDLE@ / @REPO@, from which gpu_run.sh writes the CTestTestfile.cmake of the unpacked
#     bundle (this build folder's test files hold this machine's absolute paths).
# Output: .gpubundle/dtensor-gpu.tar.xz.NN (parts of at most 16 MiB) and .gpubundle/info.txt.
#
#   scripts/gpu_bundle.sh              # builds the targets, then packs (a few minutes)
#   scripts/gpu_bundle.sh --no-build   # packs what the build folder holds
#
# Environment (defaults in brackets): BUILD_DIR [build], JOBS [nproc], GPU_BUNDLE_OUT
# [.gpubundle], BUILD_LOCK (a file: the build step runs under flock on it, for a build folder that
# others build in too) [].
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
source scripts/bench_gpu.sh  # GPU_FIGURE_PROGRAMS
BUILD_DIR=${BUILD_DIR:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
OUT_DIR=${GPU_BUNDLE_OUT:-$ROOT/.gpubundle}
BUILD=1
[ "${1:-}" = --no-build ] && BUILD=""
die() { echo "gpu_bundle.sh: $*" >&2; exit 1; }

cache=$BUILD_DIR/CMakeCache.txt
[ -f "$cache" ] || die "$BUILD_DIR is not configured (scripts/build.sh configures ./build)"
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
arch=$(cache_value CMAKE_CUDA_ARCHITECTURES)
mpiexec=$(cache_value MPIEXEC_EXECUTABLE)
nvcc=$(cat "$BUILD_DIR"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null |
  sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p')
nvcc=${nvcc%%$'\n'*}
if [ "$(cache_value DTENSOR_CUDA)" = OFF ] || [ -z "$arch" ] || [ ! -x "$nvcc" ]; then
  die "$BUILD_DIR builds no CUDA: configure it with -DDTENSOR_CUDA=ON (nvcc in PATH or in \
/usr/local/cuda)"
fi
# The lent machines are Hopper (sm_90): machine code for 90 or PTX for <= 90 must be in it.
grep -qE '(^|;)90($|[-;])' <<<"$arch" || echo "gpu_bundle.sh: warning: CUDA architectures '$arch' \
hold no sm_90 code: an H100 / H200 would JIT the PTX or fail" >&2

# The gpu label's programs ("?name": a Catch2 program not built yet, its tests undiscovered).
gpu_test_programs() {
  (cd "$BUILD_DIR" && ctest --show-only=json-v1 -L gpu) |
    python3 scripts/gpu_tests.py programs "$BUILD_DIR"
}

# build PROGRAMS...: builds their targets (a target is its program's name).
build() {
  local targets lock=()
  targets=$(printf '%s\n' "$@" | sed 's,^?,,; s,.*/,,' | sort -u | tr '\n' ' ')
  echo "== building: $targets"
  [ -n "${BUILD_LOCK:-}" ] && lock=(flock "$BUILD_LOCK")
  BUILD_DIR=$BUILD_DIR BUILD_TARGETS=$targets JOBS=${JOBS:-$(nproc)} "${lock[@]}" scripts/build.sh
}
# What is missing or undiscovered after a build (its configure step may add gpu tests).
missing() { for p in "$@"; do [[ "$p" != "?"* && -x "$BUILD_DIR/$p" ]] || echo "$p"; done; }
all_programs() { (gpu_test_programs; printf '%s\n' "${GPU_FIGURE_PROGRAMS[@]}") | sort -u; }
mapfile -t programs < <(all_programs)
if [ -n "$BUILD" ]; then
  build "${programs[@]}"
  mapfile -t programs < <(all_programs)
  mapfile -t todo < <(missing "${programs[@]}")
  if [ ${#todo[@]} -gt 0 ]; then
    build "${todo[@]}"
    mapfile -t programs < <(all_programs)
  fi
fi
mapfile -t todo < <(missing "${programs[@]}")
[ ${#todo[@]} -eq 0 ] || die "not built (or its tests not discovered): ${todo[*]} (build it)"

stage=$(mktemp -d /tmp/gpu_bundle.XXXXXX)
trap 'rm -rf "$stage"' EXIT
B=$stage/gpubundle
mkdir -p "$B/lib" "$B/mpi/bin" "$B/mpi/etc" "$B/mpi/lib/openmpi3" "$B/mpi/share" \
  "$B/mpi/pmix/lib/pmix" "$B/mpi/pmix/share"
for p in "${programs[@]}"; do
  mkdir -p "$B/build/$(dirname "$p")"
  cp "$BUILD_DIR/$p" "$B/build/$p"
done

# Loaded with dlopen by soname (dtensor/ops/matmul/openblas.cc, ops/common/onednn_loader.cc),
# so ldd does not name them.
for soname in libopenblas.so.0 libdnnl.so.2; do
  path=$(ldconfig -p | awk -v n="$soname" '$1 == n && /x86-64/ && !done {print $NF; done = 1}')
  [ -n "$path" ] || die "$soname is not installed (scripts/install_deps.sh)"
  cp -L "$path" "$B/lib/$soname"
done

# Open MPI from where its own ompi_info says it is installed.
mpi_path() {
  ompi_info --path "$1" --parsable |
    awk -F: -v n="$1" '$1 == "path" && $2 == n && !done {print $3; done = 1}'
}
orterun=$(readlink -f "$mpiexec")
cp "$orterun" "$B/mpi/bin/orterun"
ln -s orterun "$B/mpi/bin/mpirun"
ln -s orterun "$B/mpi/bin/mpiexec"
cp "$(dirname "$orterun")/orted" "$B/mpi/bin/"
cp -r "$(mpi_path pkgdatadir)" "$B/mpi/share/"
cp "$(mpi_path sysconfdir)"/*.conf "$(mpi_path sysconfdir)"/*hostfile "$B/mpi/etc/"
skipped=()
for plugin in "$(mpi_path pkglibdir)"/*.so; do
  deps=$(ldd "$plugin")
  fabric='libuc[mpst]\.|libfabric|libibverbs|librdmacm|libpsm|libinfinipath|libnl-'
  if grep -qE "$fabric" <<<"$deps"; then
    skipped+=("$(basename "$plugin" .so)")
  else
    cp "$plugin" "$B/mpi/lib/openmpi3/"
  fi
done
# PMIx: the library's own prefix (Debian: /usr/lib/x86_64-linux-gnu/pmix2/{lib,share}).
libpmix=$(ldd "$B/mpi/lib/openmpi3/mca_pmix_ext3x.so" | awk '$1 ~ /^libpmix\.so/ {print $3}')
[ -n "$libpmix" ] || die "Open MPI's pmix ext3x plugin names no libpmix"
pmix_prefix=$(dirname "$(dirname "$(readlink -f "$libpmix")")")
cp "$pmix_prefix"/lib/pmix/*.so "$B/mpi/pmix/lib/pmix/"
cp -r "$pmix_prefix/share/pmix" "$B/mpi/pmix/share/"

# Every shared library the carried programs and plugins need, but glibc's, the compiler
# runtime's and CUDA's: the rule is kept in the bundle, and gpu_run.sh checks the unpacked bundle
# against it.
system='linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil'
echo "^($system|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so" \
  >"$B/outside.regex"
mapfile -t elves < <(find "$B" -type f \( -perm -u+x -o -name '*.so*' \))
{ ldd "${elves[@]}" 2>/dev/null || true; } | awk '$2 == "=>" {print $1, $3}' | sort -u |
  while read -r name path; do
    grep -qEf "$B/outside.regex" <<<"$name" && continue
    [ "$path" = "not" ] && die "$name: not found by ldd here"
    [ -e "$B/lib/$name" ] || cp -L "$path" "$B/lib/$name"
  done

# The gpu label's tests, their paths rewritten for gpu_run.sh.
(cd "$BUILD_DIR" && ctest --show-only=json-v1 -L gpu) |
  python3 scripts/gpu_tests.py pack "$BUILD_DIR" "$ROOT" "$mpiexec" >"$B/gpu_tests.json"
# A bundle without gpu tests would make the device call report a pass having checked nothing.
[ "$(grep -c '"name": "LABELS"' "$B/gpu_tests.json")" -gt 0 ] ||
  die "ctest -L gpu lists no test in $BUILD_DIR (a build without CUDA?)"

{
  echo "dtensor GPU bundle, packed $(date -u '+%Y-%m-%d %H:%M UTC') by scripts/gpu_bundle.sh"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- dtensor tests benchmarks \
    examples || echo ' + uncommitted changes')"
  echo "build folder: $BUILD_DIR, CUDA architectures: $arch, $("$nvcc" --version | tail -1)"
  echo "tests (ctest -L gpu): $(grep -c '"name": "LABELS"' "$B/gpu_tests.json")"
  echo "programs:"; printf '  %s\n' "${programs[@]}"
  echo "Open MPI plugins left out: ${skipped[*]}"
  echo "libraries:"; (cd "$B/lib" && ls) | sed 's/^/  /'
} >"$B/info.txt"

echo "== packing"
# GPU_BUNDLE_OUT names the folder: remove only one that holds an earlier bundle (its info.txt).
if [ -e "$OUT_DIR" ] && [ ! -f "$OUT_DIR/info.txt" ] && [ -n "$(ls -A "$OUT_DIR")" ]; then
  echo "gpu_bundle.sh: $OUT_DIR exists and holds no bundle (no info.txt): not removing it" >&2
  exit 2
fi
rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"
cp "$B/info.txt" "$OUT_DIR/"
tar -C "$stage" -cf - gpubundle | xz -6 -T "${JOBS:-$(nproc)}" |
  split -b 16M -d - "$OUT_DIR/dtensor-gpu.tar.xz."
unpacked=$(du -sm "$B" | cut -f1)
packed=$(du -cb "$OUT_DIR"/dtensor-gpu.tar.xz.* | tail -1 | cut -f1)
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null |
  tail -1 | cut -f1)
echo "bundle: $((packed / 1048576)) MiB packed ($(ls "$OUT_DIR"/dtensor-gpu.tar.xz.* | wc -l) \
part(s)), $unpacked MiB unpacked; working tree that travels beside it: $((tree / 1048576)) MiB; \
together $(((packed + tree) / 1048576)) of 64 MiB"
[ $((packed + tree)) -lt $((64 * 1048576)) ] || die "bundle and working tree exceed 64 MiB"
echo "next: the one device call of docs/guides/gpu_session.md (carry .gpubundle)"
