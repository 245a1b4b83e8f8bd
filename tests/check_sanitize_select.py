#!/usr/bin/env python3
"""Checks scripts/sanitize_select.py, the choice of what the sanitizer stage runs: the layer
of a path, that a changed layer selects its families' targets, and that every suite named in
its core subset is a target of this build tree (a renamed suite would otherwise drop out of the
sanitizer run without a word).
    check_sanitize_select.py <source root> <build dir>
"""
import os
import sys

root, build = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "scripts"))
import sanitize_select as s  # noqa: E402

failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, expected {want!r}")


expect("layer of a family file", s.layer_of("dtensor/ops/conv/conv_backward.cc"), "ops/conv")
expect("layer of a family test", s.layer_of("tests/ops/conv/test_conv.cc"), "ops/conv")
expect("layer of an ops file", s.layer_of("dtensor/ops/ops_registry.cc"), "ops")
expect("layer of a nested test", s.layer_of("tests/parallel/pipeline/x.cc"), "parallel")
expect("layer of a doc", s.layer_of("docs/SEMANTICS.md"), "")
expect("layer of the build", s.layer_of("cmake/DtensorCuda.cmake"), None)
expect("layer of a shared test helper", s.layer_of("tests/common/async_test_util.h"), None)
expect("layer of the mpi main", s.layer_of("tests/mpi_main.cc"), None)
expect("layer of the ops machinery", s.layer_of("dtensor/ops/common/reduce_iter.cc"), "ops")
expect("layer of the ops machinery's tests", s.layer_of("tests/ops/common/x.cc"), "ops/common")
expect("layer of the parity sweep", s.layer_of("tests/ops/parity/test_torch_parity.cc"),
       "ops/parity")
expect("the parity sweep is core", "test_torch_parity" in s.CORE_UNIT, True)
expect("ops selects a family", s.touches("ops", {"ops/conv"}), True)
expect("a family selects itself", s.touches("ops/conv", {"ops/conv"}), True)
expect("a family leaves another", s.touches("ops/conv", {"ops/pool"}), False)
expect("a prefix is not a family", s.touches("ops/con", {"ops/conv"}), False)

targets = set(s.target_sources(build))
catch, plain = s.unit_entries(build)
units = catch | set(plain.values())
for name in sorted(s.CORE_UNIT):
    if name not in units:
        failures.append(f"core unit suite {name} is not a unit test target of {build}")
for name in s.CORE_MPI + sorted(s.LAYER_MPI):
    if name not in targets:
        failures.append(f"mpi suite {name} is not a test target of {build}")
for name, layer in s.LAYER_MPI.items():
    if not any(os.path.isdir(os.path.join(root, d, layer)) for d in ("dtensor", "tests")):
        failures.append(f"{name}'s layer {layer} is no folder of dtensor/ or tests/")

# The regex the stage runs ctest with must name every unit suite's entries (it once named
# "<target>: ", which no discovered entry matches, and ran 2 of ~600 entries): with every unit
# target selected, each Catch suite has an entry it matches and each plain entry is matched.
import re  # noqa: E402
import subprocess  # noqa: E402

regex = s.unit_regex(sorted(units), catch, plain)
listing = subprocess.run(["ctest", "-N", "-L", "unit", "-R", regex], cwd=build,
                         capture_output=True, text=True).stdout
matched = re.findall(r"Test +#[0-9]+: (.+)$", listing, re.M)
for name in sorted(catch):
    if not any(m.startswith(name + ":") for m in matched):
        failures.append(f"the unit regex matches no entry of the Catch suite {name}")
for name in sorted(plain):
    if name not in matched:
        failures.append(f"the unit regex misses the entry {name}")
for m in matched:
    if not m.split(":")[0] in units and m not in plain:
        failures.append(f"the unit regex matches {m}, of no selected target")

for f in failures:
    print("check_sanitize_select:", f)
print(f"check_sanitize_select: {len(units)} unit targets, {len(matched)} unit entries matched, "
      f"{len(s.CORE_UNIT)} core, {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
