#!/usr/bin/env python3
"""Chooses what scripts/sanitize.sh builds and runs: a fixed core subset plus the layers a change
touches (docs/RELIABILITY.md, "Sanitizers").

The change is `git diff <base>..HEAD` plus what is uncommitted, where <base> is the commit in
.ci/sanitize-base (the last commit whose CI run landed: a session moves it to its starting HEAD).
A layer is a folder of dtensor/ (ops by family: dtensor/ops/conv is "ops/conv"); a test target
belongs to the layers of its source files' folders under tests/ (tests/ops/conv -> "ops/conv",
tests/nn -> "nn"). A file directly in dtensor/<layer>/ touches every family of that layer. The
build's own files (the top-level CMakeLists.txt, cmake/), an unknown or unreachable base, or
SANITIZE_ALL=1 select every target.

Usage: sanitize_select.py <build dir> <repo root>; prints three lines: the targets to build, a
ctest regex of the unit entries to run, the mpi targets to run at 2 and 4 ranks (each line may
be empty), then a report line for the log on stderr. SANITIZE_MPI=0: no mpi targets.
"""
import glob
import os
import re
import subprocess
import sys

# Always sanitized: the unit suites of the layers everything stands on (tensor, collectives,
# device mesh, sharding propagation, autograd engine, RNG, the shared op machinery and the
# families every model uses, and the PyTorch parity sweep: every op's kernels on inf, NaN and
# subnormal inputs, in a second; a family change would not select it, tests/ops/parity being
# its own layer key) and the mpi suites of communication, redistribution and bad input.
CORE_UNIT = {
    "tensor_tests", "dtensor_core_tests", "test_sharding_propagation", "autograd_tests",
    "test_saved_tensor_versions", "rng_tests", "test_collective_check_unit", "test_minmax_keys",
    "test_ops_common", "test_ops_elementwise", "test_ops_matmul", "test_ops_reduction",
    "test_ops_view", "test_threads", "test_torch_parity",
}
CORE_MPI = [
    "test_collectives", "test_device_mesh", "test_dtensor_mpi", "test_redistribute_mpi",
    "test_bad_inputs", "test_bad_inputs_ops", "fuzz_redistribute", "test_p2p_progress_mpi",
]
# mpi suites sanitized when their layer is touched: a compile replay runs kernels on tensors the
# capture kept; ranks comparing captures; point-to-point transfers polled by the progress thread.
LAYER_MPI = {
    "test_compile_mpi": "compile", "test_compile_agree_mpi": "compile",
    "test_transfer_mpi": "parallel",
}


# Files every test target is built from or with: a change selects everything.
SHARED_TEST_FILES = {"tests/catch_main.cc", "tests/mpi_main.cc"}


def layer_of(path):
    """The layer key of a repository path: "" when it belongs to no layer (docs, scripts, the
    umbrella header, tests/CMakeLists.txt, which only lists folders and script checks), None when
    every target depends on it (the build's files, the tests' mains and shared helpers)."""
    parts = path.split("/")
    if path == "CMakeLists.txt" or parts[0] == "cmake" or path in SHARED_TEST_FILES:
        return None
    if parts[0] == "tests" and len(parts) > 2 and parts[1] == "common":
        return None
    if parts[0] not in ("dtensor", "tests") or len(parts) < 3:
        return ""
    if parts[1] == "ops":
        # dtensor/ops/common (iteration, SIMD dispatch, strategy helpers) serves every family.
        if len(parts) == 3 or (parts[0] == "dtensor" and parts[2] == "common"):
            return "ops"
        return "ops/" + parts[2]
    return parts[1]


def touches(changed, target_layers):
    """Whether a changed layer key selects a target of these layers ("ops" selects "ops/x")."""
    return any(t == changed or t.startswith(changed + "/") for t in target_layers)


def target_sources(build):
    """test target name -> its source paths, for the targets of the current configure (a reused
    build folder keeps the files of renamed or removed targets: TargetDirectories.txt does not)."""
    out = {}
    listed = os.path.join(build, "CMakeFiles", "TargetDirectories.txt")
    tests_dir = os.path.realpath(os.path.join(build, "tests")) + "/"
    for line in open(listed, encoding="utf-8"):
        target_dir = os.path.realpath(line.strip())
        if not target_dir.startswith(tests_dir) or not target_dir.endswith(".dir"):
            continue
        info = os.path.join(target_dir, "DependInfo.cmake")
        if not os.path.exists(info):
            continue
        text = open(info, encoding="utf-8").read()
        name = os.path.basename(target_dir)[: -len(".dir")]
        out[name] = [os.path.realpath(f)
                     for f in re.findall(r'^\s*"([^"]+\.(?:cc|cpp|cu))" "', text, re.M)]
    return out


def changed_files(root, base):
    """Paths changed since base (committed or not), or None when base is not usable."""
    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)
    if not base or git("merge-base", "--is-ancestor", base, "HEAD").returncode != 0:
        return None
    files = set(git("diff", "--name-only", base, "HEAD").stdout.split())
    files |= set(git("diff", "--name-only", "HEAD").stdout.split())
    for line in git("status", "--porcelain", "--untracked-files=all").stdout.splitlines():
        files.update(line[3:].strip().split(" -> "))
    return sorted(f for f in files if f)


def unit_entries(build):
    """Unit ctest entries: (catch targets, {plain entry name: target}) of the tree."""
    catch, plain, labels = set(), {}, set()
    for f in glob.glob(os.path.join(build, "tests", "**", "CTestTestfile.cmake"), recursive=True):
        for line in open(f, encoding="utf-8"):
            # The Catch suites of the current configure (their include files, not a glob of the
            # folder, which may hold a renamed target's).
            m = re.match(r'include\("[^"]*/([^/"]+)_include-[0-9a-f]*\.cmake"\)', line)
            if m:
                catch.add(m.group(1))
            m = re.match(r'add_test\(\[=\[(.*?)\]=\] "([^"]+)"', line)
            if m and m.group(2).startswith(os.path.abspath(build) + "/"):
                plain[m.group(1)] = os.path.basename(m.group(2))
            m = re.match(r'set_tests_properties\(\[=\[(.*?)\]=\].*LABELS "unit"', line)
            if m:
                labels.add(m.group(1))
    return {t for t in catch if "gpu" not in t}, {n: t for n, t in plain.items() if n in labels}


def unit_regex(selected, catch, plain):
    """A ctest regex (CMake's syntax) of the unit entries of the selected targets: a Catch suite's
    entries are named "<target>:<test case>" (catch_discover_tests' TEST_PREFIX "<target>: " loses
    its space), a plain entry by its own name. Empty when nothing is selected."""
    def esc(name):
        return re.sub(r"([.+*?()\[\]^$|\\])", r"\\\1", name)
    names = [esc(t) + ":" for t in sorted(set(selected) & catch)]
    names += [esc(n) + "$" for n, t in sorted(plain.items()) if t in selected]
    return "^(" + "|".join(names) + ")" if names else ""


def main():
    build, root = sys.argv[1], os.path.realpath(sys.argv[2])
    sources = target_sources(build)
    catch, plain = unit_entries(build)
    units = catch | set(plain.values())
    base_file = os.path.join(root, ".ci", "sanitize-base")
    base = open(base_file).read().strip() if os.path.exists(base_file) else ""
    files = None if os.environ.get("SANITIZE_ALL") == "1" else changed_files(root, base)
    layers = None if files is None else {layer_of(f) for f in files}
    everything = layers is None or None in layers
    if not everything:
        layers.discard("")

    def layers_of(target):
        keys = set()
        for src in sources.get(target, []):
            key = layer_of(os.path.relpath(src, root))
            if key:
                keys.add(key)
        return keys

    def chosen(target, core):
        return everything or core or any(touches(c, layers_of(target)) for c in layers)

    if not any(layers_of(t) for t in units):
        sys.exit(f"sanitize_select: no test target of {build} has a source under {root}/tests")
    unit_sel = sorted(t for t in units if chosen(t, t in CORE_UNIT))
    mpi_sel = [t for t in CORE_MPI if t in sources]
    mpi_sel += [t for t, layer in LAYER_MPI.items()
                if t in sources and (everything or any(touches(c, {layer}) for c in layers))]
    if os.environ.get("SANITIZE_MPI", "1") != "1":
        mpi_sel = []
    print(" ".join(unit_sel + mpi_sel))
    print(unit_regex(unit_sel, catch, plain))
    print(" ".join(mpi_sel))
    why = ("every target (" + ("SANITIZE_ALL=1" if os.environ.get("SANITIZE_ALL") == "1" else
                               "no usable base" if files is None else "build files changed") + ")"
           if everything else "core subset + layers touched since " + base[:12] + ": " +
           (", ".join(sorted(layers)) or "none"))
    print(f"sanitize: {why}; {len(unit_sel)} of {len(units)} unit targets, "
          f"{len(mpi_sel)} mpi targets", file=sys.stderr)


if __name__ == "__main__":
    main()
