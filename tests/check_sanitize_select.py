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

for f in failures:
    print("check_sanitize_select:", f)
print(f"check_sanitize_select: {len(units)} unit targets, {len(s.CORE_UNIT)} core, "
      f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
