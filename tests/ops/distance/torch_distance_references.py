"""PyTorch reference values and gradients for the reductions and distances of issue 44 (H1),
tested in tests/ops/distance/test_distance.cc: median (whole / along a dim: values, indices,
ties, NaN), mode (ties), logcumsumexp (-inf, gradient with mixed-sign upstream), var_mean /
std_mean (gradients of both outputs), cosine_similarity (broadcast, a zero row), pairwise_distance
(p 2, 1, inf, keepdim) and cdist (p 2, 1, inf, 3, 0, 1.5), float64.

Run from outside the repository (the values committed are from torch 2.15.0+cu132, CPU):
  cd /tmp && /root/venv/bin/python /work/main/tests/ops/distance/torch_distance_references.py \
      > /work/main/tests/ops/distance/torch_distance_references.h
Gradients are of sum(upstream * output) (upstream: the case's `u`, one per output).
"""
import math

import torch

torch.set_default_dtype(torch.float64)
F = torch.nn.functional


def vals(n, a, b, c=0.0):
    return [round(math.sin(a * i + b) * 3 + c, 3) for i in range(n)]


TIES = [3, 1, 3, 1, 2, 1, 5, 5, 2, 2, 7, 7, 4, 2, 2, 9, 2, 8, 2, 2, 2, 1, 1, 1]  # [4, 6]
NANS = [1, float("nan"), 2, 3, 4, 1, 1, 2]  # [2, 4]
LCSE = vals(15, 0.9, 0.3)
LCSE[3] = -float("inf")
LCSE_U = vals(15, 1.3, 0.7)
VM = vals(12, 0.8, 0.1)
COS_A = vals(12, 0.6, 0.2)
COS_B = vals(12, 1.1, 0.5)
COS_C = vals(4, 0.4, 1.0)
X1 = vals(24, 0.7, 0.1)  # [2, 3, 4]
X2 = vals(40, 0.45, 0.9)  # [2, 5, 4]
CD_U = vals(30, 0.33, 0.2)

cases = []


def add(name, out, inputs=(), us=None):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    grads, ups = [], []
    if inputs:
        us = us or [torch.tensor(vals(o.numel(), 0.77 + k, 0.4)).reshape(o.shape)
                    for k, o in enumerate(outs)]
        total = sum((o * u).sum() for o, u in zip(outs, us) if o.dtype.is_floating_point)
        grads = torch.autograd.grad(total, inputs)
        ups = [u.reshape(-1).tolist() for u in us]
    cases.append((name, [o.detach().reshape(-1).tolist() for o in outs],
                  [g.reshape(-1).tolist() for g in grads], ups))


def t(v, shape, grad=False):
    return torch.tensor(v, dtype=torch.float64).reshape(shape).requires_grad_(grad)


x = t(TIES, (4, 6), True)
add("median_all", torch.median(x), [x])
add("median_dim1", torch.median(t(TIES, (4, 6)), 1))
add("median_dim0_keep", torch.median(t(TIES, (4, 6)), 0, keepdim=True))
add("mode_dim1", torch.mode(t(TIES, (4, 6)), 1))
add("mode_dim0", torch.mode(t(TIES, (4, 6)), 0))
add("median_nan_dim1", torch.median(t(NANS, (2, 4)), 1))
add("mode_nan_dim1", torch.mode(t(NANS, (2, 4)), 1))
x = t(LCSE, (3, 5), True)
add("logcumsumexp_dim1", torch.logcumsumexp(x, 1), [x], [t(LCSE_U, (3, 5))])
x = t(LCSE, (3, 5), True)
add("logcumsumexp_dim0", torch.logcumsumexp(x, 0), [x], [t(LCSE_U, (3, 5))])
x = t(VM, (3, 4), True)
add("var_mean_dim1", torch.var_mean(x, 1), [x])
x = t(VM, (3, 4), True)
add("std_mean_dim0_c0_keep", torch.std_mean(x, 0, correction=0, keepdim=True), [x])
a, b = t(COS_A, (3, 4), True), t(COS_B, (3, 4), True)
add("cosine_dim1", F.cosine_similarity(a, b), [a, b])
a, c = t(COS_A, (3, 4), True), t(COS_C, (4,), True)
add("cosine_bcast_dim_m1", F.cosine_similarity(a, c, dim=-1), [a, c])
z = COS_A[:]
z[4:8] = [0, 0, 0, 0]
a, b = t(z, (3, 4), True), t(COS_B, (3, 4), True)
add("cosine_zero_row", F.cosine_similarity(a, b), [a, b])
for p, keep in ((2.0, False), (1.0, True), (float("inf"), False)):
    a, b = t(COS_A, (3, 4), True), t(COS_B, (3, 4), True)
    add("pairwise_p%g%s" % (p, "_keep" if keep else ""), F.pairwise_distance(a, b, p, 1e-6, keep),
        [a, b])
for p in (2.0, 1.0, float("inf"), 3.0, 0.0, 1.5):
    a, b = t(X1, (2, 3, 4), True), t(X2, (2, 5, 4), True)
    add("cdist_p%g" % p, torch.cdist(a, b, p), [a, b], [t(CD_U, (2, 3, 5))])

# Round 3 of the parity hunt: the whole-tensor median when it is NaN (the gradient goes to the
# NaN elements) and cdist with p < 1 where a component of a difference is 0 (subgradient 0).
x = t(NANS, (2, 4), True)
add("median_all_nan", torch.median(x), [x])
CD_A = [0, 0, 1, 1, 2, 3]  # [2, 3]
CD_B = [0, 1, 1, 1, 0, 3, 0, 0, 1]  # [3, 3]
a, b = t(CD_A, (2, 3), True), t(CD_B, (3, 3), True)
add("cdist_p0.5_zero_diff", torch.cdist(a, b, 0.5), [a, b])

# The PyTorch parity sweep (tests/ops/parity): cdist p inf on float32 inputs (the gradient goes
# to the components whose float32 |diff| is the distance; dtensor compared the exact double
# |diff| and lost most of them), and a NaN component (p 0 counts it NaN; p 1 and 3 give its
# gradient NaN, the other components' theirs).
a, b = t(X1, (2, 3, 4)).float().requires_grad_(), t(X2, (2, 5, 4)).float().requires_grad_()
add("cdist_pinf_f32", torch.cdist(a, b, float("inf")), [a, b], [t(CD_U, (2, 3, 5)).float()])
CD_N = [0, float("nan"), 1, 1, 2, 3]  # [2, 3]
for p in (0.0, 1.0, 3.0):
    a, b = t(CD_N, (2, 3), True), t(CD_B, (3, 3), True)
    add("cdist_p%g_nan" % p, torch.cdist(a, b, p), [a, b])


def fmt(values):
    return "{" + ", ".join(repr(float(v)) if v == v and abs(v) != float("inf") else
                           ("kNaN" if v != v else ("kInf" if v > 0 else "-kInf"))
                           for v in values) + "}"


print("// Generated by tests/ops/distance/torch_distance_references.py (torch %s); do not edit." %
      torch.__version__)
print("// Run: cd /tmp && /root/venv/bin/python \\")
print("//   /work/main/tests/ops/distance/torch_distance_references.py \\")
print("//   > /work/main/tests/ops/distance/torch_distance_references.h")
print("#pragma once\n\n#include <limits>\n#include <string>\n#include <vector>\n")
print("namespace torch_ref {\n// clang-format off")
print("constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();")
print("constexpr double kInf = std::numeric_limits<double>::infinity();")
for name, v in (("kTies", TIES), ("kNans", NANS), ("kLcse", LCSE), ("kLcseU", LCSE_U),
                ("kVm", VM), ("kCosA", COS_A), ("kCosB", COS_B), ("kCosC", COS_C), ("kX1", X1),
                ("kX2", X2), ("kCdU", CD_U), ("kCdA", CD_A), ("kCdB", CD_B), ("kCdN", CD_N)):
    print("inline const std::vector<double> %s = %s;" % (name, fmt(v)))
print("struct Case {\n  std::string name;\n  std::vector<std::vector<double>> outputs;\n"
      "  std::vector<std::vector<double>> grads;\n"
      "  std::vector<std::vector<double>> upstream;  // one per output\n};")
print("inline const std::vector<Case> kCases = {")
for name, outs, grads, ups in cases:
    print("  {\"%s\", {%s},\n   {%s},\n   {%s}}," % (name, ", ".join(fmt(o) for o in outs),
                                                  ", ".join(fmt(g) for g in grads),
                                                  ", ".join(fmt(u) for u in ups)))
print("};\n// clang-format on\n}  // namespace torch_ref")
