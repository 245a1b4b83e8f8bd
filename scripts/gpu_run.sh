#!/usr/bin/env bash
# The whole GPU check in one call on a lent GPU machine (docs/guides/gpu_session.md), run in the
# repository copy's root with .gpubundle carried (scripts/gpu_bundle.sh packs it here): lifts the
# CPU affinity, unpacks the bundle, finds the image's CUDA libraries (cudart, cuBLAS, NCCL:
# PyTorch's pip nvidia-* packages or /usr/local/cuda) and driver, relocates the bundle's Open MPI
# and PMIx, checks that every carried program and library resolves its libraries from the bundle
# or glibc / libstdc++ / libgcc / CUDA, checks nvidia-smi, runs the gpu label (scripts/
# bench_gpu.sh's gpu_suite: ctest -L gpu --output-on-failure), then its GPU figures (gpu_figures)
# and their report. Everything goes to $OUT: gpu_run.log (all output), suite.log, suite.txt,
# the figures' files (gpu.jsonl, gpu_redist.jsonl, examples.log, ...) and gpu_report.md; past 8
# files (what comes back from $OUT), all but gpu_run.log, suite.log and gpu_report.md go into
# results.tar.gz. Exit status: the gpu suite's (2 when the bundle or the GPU is missing).
#
# Environment (defaults in brackets): OUT [/tmp/gpu_run_out], GPU_BUNDLE_DIR (where to unpack)
# [/tmp/dtensor-gpubundle], GPU_RUN_FIGURES (0: the suite only) [1], GPU_RUN_SUITE_TIMEOUT and
# GPU_RUN_FIGURES_TIMEOUT (seconds) [240, 240], GPU_RUN_ALLOW_NO_GPU (1: go on without a GPU,
# every gpu test then reports skipped: to check a bundle on a machine without one) [0],
# GPU_CUDA_LIB_DIRS (colon-separated folders searched first for the CUDA libraries) [],
# GPU_RUN_LD_DEBUG (1: LD_DEBUG=files over the suite, then what the bundle's programs loaded from
# outside the bundle and glibc / libstdc++ / libgcc / CUDA is listed) [0], GPU_RUN_NO_CTEST (1:
# the suite through scripts/gpu_tests.py run even where ctest exists) [0].
#
# scripts/gpu_run.sh COMMAND... runs COMMAND in the prepared environment (bundle unpacked, library
# path, Open MPI relocated; $GPU_BUNDLE_DIR is the bundle) instead of the suite and the figures,
# e.g. scripts/gpu_run.sh bash -c 'mpirun -np 2 $GPU_BUNDLE_DIR/build/tests/gpu/test_dtensor_cuda'.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
taskset -pc "0-$(($(nproc --all) - 1))" $$ >/dev/null 2>&1 || true  # commands start on 1 CPU
OUT=${OUT:-/tmp/gpu_run_out}  # the device sets OUT
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_run.log") 2>&1
tee_pid=$!
trap 'exec >&- 2>&-; wait "$tee_pid"' EXIT  # the log complete before the call returns
B=${GPU_BUNDLE_DIR:-/tmp/dtensor-gpubundle}
source scripts/bench_gpu.sh  # gpu_suite, gpu_figures, gpu_report
say() { echo "== $(date -u +%H:%M:%S) $*"; }

say "unpacking .gpubundle into $B ($(nproc) CPUs)"
parts=(.gpubundle/dtensor-gpu.tar.xz.*)
[ -e "${parts[0]}" ] || { echo "no .gpubundle: scripts/gpu_bundle.sh makes it; carry it"; exit 2; }
rm -rf "$B" && mkdir -p "$B"
if command -v xz >/dev/null; then
  cat "${parts[@]}" | tar -xJf - -C "$B" --strip-components=1
else
  cat "${parts[@]}" | python3 -c 'import sys, tarfile
with tarfile.open(fileobj=sys.stdin.buffer, mode="r|xz") as t:
    for m in t:
        m.name = m.name.partition("/")[2] or "."
        t.extract(m, sys.argv[1])' "$B"
fi || { echo "unpacking failed"; exit 2; }
cat "$B/info.txt"

# The CUDA libraries the bundle leaves out, where the image keeps them: the driver's libcuda where
# the loader finds it by default, else in the driver's folder; the others from PyTorch's pip
# packages first.
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
find_lib() {  # find_lib NAME DIR...: the folder of the first NAME found
  local name=$1 dir found
  shift
  for dir in ${GPU_CUDA_LIB_DIRS//:/ } "$@"; do
    [ -d "$dir" ] || continue
    found=$(find -L "$dir" -maxdepth 3 -name "$name" -print -quit 2>/dev/null)
    [ -n "$found" ] && { dirname "$found"; return 0; }
  done
  return 1
}
cuda_dirs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcuda.so.1; do
  if [ $lib = libcuda.so.1 ]; then
    dir=$(ldconfig -p | awk -v n=$lib '$1 == n && /x86-64/ {print $NF}' | head -1)
    [ -n "$dir" ] && { echo "$lib: $dir (the loader's default)"; continue; }
    dir=$(find_lib $lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu)
  else
    dir=$(find_lib $lib "$site/nvidia" /usr/local/cuda/lib64 /usr/local/cuda/lib)
  fi
  if [ -n "$dir" ]; then
    echo "$lib: $dir"
    case ":$cuda_dirs:" in *":$dir:"*) ;; *) cuda_dirs=${cuda_dirs:+$cuda_dirs:}$dir ;; esac
  else
    echo "$lib: NOT FOUND"
  fi
done
# The library path of the bundle's programs only (the image's own tools keep theirs), the
# image's own LD_LIBRARY_PATH last.
libpath=$B/lib:$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$B/mpi/bin:$PATH
# Debian's Open MPI and PMIx moved into the bundle (their compiled-in folders may hold the
# image's own Open MPI plugins and parameter files, which do not match); no hwloc plugins.
export OPAL_PREFIX=$B/mpi OPAL_EXEC_PREFIX=$B/mpi OPAL_BINDIR=$B/mpi/bin OPAL_LIBDIR=$B/lib \
  OPAL_PKGLIBDIR=$B/mpi/lib/openmpi3 OPAL_DATADIR=$B/mpi/share \
  OPAL_PKGDATADIR=$B/mpi/share/openmpi OPAL_SYSCONFDIR=$B/mpi/etc \
  OMPI_MCA_mca_base_component_path=$B/mpi/lib/openmpi3
export PMIX_PREFIX=$B/mpi/pmix PMIX_LIBDIR=$B/lib PMIX_PKGLIBDIR=$B/mpi/pmix/lib/pmix \
  PMIX_DATADIR=$B/mpi/pmix/share PMIX_PKGDATADIR=$B/mpi/pmix/share/pmix \
  PMIX_SYSCONFDIR=$B/mpi/etc PMIX_MCA_mca_base_component_path=$B/mpi/pmix/lib/pmix
export HWLOC_PLUGINS_PATH=$B/mpi/hwloc
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # commands there run as root

# A library from outside the bundle must be glibc's, the compiler runtime's or CUDA's (the
# bundle's rule, outside.regex).
outside_ok() { grep -qEf "$B/outside.regex" <<<"$1"; }  # outside_ok NAME

say "library check: ldd of every carried program and library"
bad=0
while IFS= read -r -d '' file; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ "$path" = "$B"/* ]] && continue
    outside_ok "$name" && continue
    echo "  ${file#"$B"/}: $name => $path"
    bad=$((bad + 1))
  done < <(LD_LIBRARY_PATH=$libpath ldd "$file" 2>/dev/null)
done < <(find "$B" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
echo "library check: $bad resolved outside the bundle and glibc / libstdc++ / libgcc / CUDA"

say "nvidia-smi"
gpu=1
if ! nvidia-smi; then
  gpu=""
  echo "NO GPU VISIBLE: every gpu test reports skipped"
  [ "${GPU_RUN_ALLOW_NO_GPU:-0}" = 1 ] || exit 2
fi

# With arguments: that command in this environment instead of the suite and the figures.
export GPU_BUNDLE_DIR=$B
if [ $# -gt 0 ]; then
  say "running: $*"
  LD_LIBRARY_PATH=$libpath "$@"
  rc=$?
  say "done: status $rc"
  exit $rc
fi

# gpu_suite runs `ctest -L gpu --output-on-failure` in the folder given: the bundle's root, whose
# CTestTestfile.cmake gpu_tests.py writes; the function below stands for ctest there.
python3 scripts/gpu_tests.py unpack "$B" "$ROOT" || exit 2
ld_debug=()
if [ "${GPU_RUN_LD_DEBUG:-0}" = 1 ]; then
  rm -rf "$B/ld_debug" && mkdir -p "$B/ld_debug"
  ld_debug=(LD_DEBUG=files "LD_DEBUG_OUTPUT=$B/ld_debug/ld")
fi
suite_timeout=${GPU_RUN_SUITE_TIMEOUT:-240}
# ctest 3.22 or later (ENVIRONMENT_MODIFICATION picks the ranks' CUDA backend), else the runner.
ctest_bin=$(command -v ctest || ls /opt/*/.venv/bin/ctest 2>/dev/null | head -1)
ctest_version=$([ -n "$ctest_bin" ] && "$ctest_bin" --version | sed -n 's/^ctest version //p')
if [ "${GPU_RUN_NO_CTEST:-0}" = 1 ] ||
  [ "$(printf '%s\n' 3.22 "${ctest_version:-0}" | sort -V | head -1)" != 3.22 ]; then
  say "gpu suite: scripts/gpu_tests.py run (ctest: ${ctest_bin:-none} ${ctest_version})"
  ctest() {
    timeout -k 10 "$suite_timeout" env "LD_LIBRARY_PATH=$libpath" "${ld_debug[@]}" \
      python3 "$ROOT/scripts/gpu_tests.py" run "$B"
  }
else
  say "gpu suite: $ctest_bin (ctest $ctest_version)"
  ctest() {
    timeout -k 10 "$suite_timeout" env "LD_LIBRARY_PATH=$libpath" "${ld_debug[@]}" "$ctest_bin" "$@"
  }
fi
gpu_suite "$B" "$OUT"
rc=$?
[ $rc = 124 ] && echo "gpu suite: stopped after $suite_timeout s"
say "gpu suite: status $rc"

if [ ${#ld_debug[@]} -gt 0 ]; then
  say "libraries the bundle's programs loaded from outside the bundle and glibc / ... / CUDA:"
  # The objects each bundle program loaded (ctest's own and the tools' are not checked): those
  # before "transferring control: PROGRAM" in a process's trace, and the dlopen'ed ones after.
  loaded=$(awk -v B="$B/" '
    function flush() { if (index(prog, B) == 1) for (o in buf) print o; delete buf }
    FNR == 1 { flush(); prog = "" }
    /transferring control: / { prog = $NF; flush(); next }
    /calling init: / { buf[$NF] = 1 }
    END { flush() }' "$B"/ld_debug/ld.* | sort -u)
  while read -r path; do
    [[ "$path" = "$B"/* ]] || outside_ok "$(basename "$path")" || echo "  $path"
  done <<<"$loaded"
  echo "($(find "$B/ld_debug" -type f | wc -l) processes traced; $(grep -c "^$B/" <<<"$loaded") \
objects loaded from the bundle, $(grep -c "^$B/mpi/" <<<"$loaded") of them Open MPI / PMIx plugins)"
fi

if [ -n "$gpu" ] && [ "${GPU_RUN_FIGURES:-1}" = 1 ]; then
  say "figures: scripts/bench_gpu.sh's gpu_figures"
  LD_LIBRARY_PATH=$libpath timeout -k 10 "${GPU_RUN_FIGURES_TIMEOUT:-240}" bash -c "set -eo pipefail
    source scripts/bench_gpu.sh
    gpu_figures '$B/build' '$OUT' mpirun --allow-run-as-root --oversubscribe --bind-to none"
  say "figures: status $?"
  arch=$(sed -n 's/.*CUDA architectures: \([^,]*\),.*/\1/p' "$B/info.txt")
  gpu_report "$OUT" "$arch" "scripts/gpu_run.sh on the programs scripts/gpu_bundle.sh built \
($(sed -n 's/^commit: //p' "$B/info.txt"))" >"$OUT/gpu_report.md"
  cat "$OUT/gpu_report.md"
fi
# At most 8 files come back: the rest go into one archive.
mapfile -t files < <(cd "$OUT" && ls)
if [ ${#files[@]} -gt 8 ]; then
  mapfile -t rest < <(printf '%s\n' "${files[@]}" | grep -vxE 'gpu_run.log|suite.log|gpu_report.md')
  tar -C "$OUT" -czf "$OUT/results.tar.gz" "${rest[@]}" && (cd "$OUT" && rm -f "${rest[@]}")
fi
say "done: gpu suite status $rc; in $OUT: $(cd "$OUT" && echo *)"
exit $rc
