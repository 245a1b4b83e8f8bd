#!/usr/bin/env python3
"""Prints tests/autograd/double_backward_references.inc: PyTorch's double backward (create_graph)
of batch_norm (training and eval), group_norm and instance_norm, and of prod / cumprod on inputs
with zeros (written as repeated multiplication, whose derivatives are exact there), float64, for
the inputs of test_double_backward_mpi.cc. Regenerate with
  /root/venv/bin/python tests/autograd/torch_double_backward_references.py \\
      > tests/autograd/double_backward_references.inc
"""
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def det(shape, salt, lo, step):
    """Element i = lo + step * ((i * 7 + salt) % 11), as tests::det_input."""
    n = 1
    for s in shape:
        n *= s
    return torch.tensor([lo + step * ((i * 7 + salt) % 11) for i in range(n)]).reshape(shape)


def full(name, t):
    vals = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
    return f"inline const std::vector<double> {name} = {{{vals}}};"


SHAPE = [5, 4, 3]
GROUPS = 2


def penalty(op):
    """gx, gw = grad(sum(norm(x) * r), [x, w], create_graph); then the gradients of
    sum((gx + gx * gx) * s) + sum(gw * gw) with respect to x and w."""
    x = det(SHAPE, 1, -1.0, 0.25).requires_grad_(True)
    w = det([4], 2, 0.5, 0.125).requires_grad_(True)
    b = det([4], 3, -0.5, 0.125).requires_grad_(True)
    rm = det([4], 4, -0.25, 0.0625)
    rv = det([4], 5, 0.5, 0.25)
    r = det(SHAPE, 6, -0.75, 0.125)
    s = det(SHAPE, 7, 0.25, 0.125)
    if op == "batch_train":
        y = F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5)
    elif op == "batch_eval":
        y = F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5)
    elif op == "group":
        y = F.group_norm(x, GROUPS, w, b, 1e-5)
    else:
        y = F.instance_norm(x, None, None, w, b, True, 0.1, 1e-5)
    gx, gw = torch.autograd.grad((y * r).sum(), [x, w], create_graph=True)
    pen = ((gx + gx * gx) * s).sum() + (gw * gw).sum()
    hx, hw = torch.autograd.grad(pen, [x, w])
    return gx, gw, hx, hw


def cumprod_by_mul(x, dim):
    """cumprod as repeated multiplication: every derivative exact where x has zeros."""
    parts = [x.select(dim, 0)]
    for i in range(1, x.shape[dim]):
        parts.append(parts[-1] * x.select(dim, i))
    return torch.stack(parts, dim)


def scan_penalty(kind):
    """As penalty() for prod along dim 1 (kind 0), prod of all (1), cumprod along dim 1 (2) and
    along dim 0 (3), and cumprod of a vector along dim -1 (4), with zeros in x; the first gradient
    and the second."""
    x = det([3, 4], 5, -2.5, 0.5) if kind == 1 else det([7], 2, -2.5, 0.5) if kind == 4 else \
        det([5, 6], 0, -2.5, 0.5)
    x.requires_grad_(True)
    s = det(list(x.shape), 6, 0.25, 0.125)
    if kind == 0:
        y, r = cumprod_by_mul(x, 1)[:, -1], det([5], 5, -0.5, 0.125)
    elif kind == 1:
        y, r = cumprod_by_mul(x.reshape(-1), 0)[-1], det([1], 0, 0.75, 0.0)
    elif kind == 4:
        y, r = cumprod_by_mul(x, 0), det([7], 5, -0.5, 0.125)
    else:
        y, r = cumprod_by_mul(x, 1 if kind == 2 else 0), det([5, 6], 5, -0.5, 0.125)
    gx, = torch.autograd.grad((y * r).sum(), [x], create_graph=True)
    hx, = torch.autograd.grad(((gx + gx * gx) * s).sum(), [x])
    return gx, hx


print(f"// PyTorch {torch.__version__} (CPU, float64, printed in full): the double backward of")
print("// torch_double_backward_references.py, for test_double_backward_mpi.cc.")
print("#pragma once")
print()
print("#include <vector>")
print()
print("namespace dtensor::test::double_backward_refs {")
print()
for op, name in [("batch_train", "BatchTrain"), ("batch_eval", "BatchEval"), ("group", "Group"),
                 ("instance", "Instance")]:
    for part, t in zip(["Gx", "Gw", "Hx", "Hw"], penalty(op)):
        print(full(f"k{name}{part}", t))
for kind, name in [(0, "ProdDim"), (1, "ProdAll"), (2, "Cumprod1"), (3, "Cumprod0"),
                   (4, "CumprodVec")]:
    for part, t in zip(["Gx", "Hx"], scan_penalty(kind)):
        print(full(f"k{name}{part}", t))
print()
print("}  // namespace dtensor::test::double_backward_refs")
