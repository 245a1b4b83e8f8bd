"""Reference values of torch.autograd.functional (vjp, jvp, vhp, hvp, jacobian, hessian) for
tests/autograd/test_autograd_functional.cc, written to tests/autograd/functional_references.inc.

Run: python tests/autograd/torch_functional_references.py > tests/autograd/functional_references.inc
(any venv with torch; the committed values are from torch 2.15, CPU, float64, vectorize=False).
"""
import torch
import torch.autograd.functional as AF

torch.set_default_dtype(torch.float64)


def inputs():
    x = (torch.arange(12.0) / 7 - 0.5).reshape(3, 4)
    w = (torch.arange(8.0) / 5 - 0.3).reshape(4, 2)
    return x, w


# Two outputs of two inputs, and one scalar (the C++ test builds the same functions).
def g(x, w):
    mm = x @ w
    o1 = torch.softmax(torch.tanh(mm), 1)
    o2 = (torch.exp(torch.tanh(mm)) * torch.log_softmax(mm, 0)).sum(1)
    return o1, o2


def s(x, w):
    mm = x @ w
    return (torch.softmax(torch.tanh(mm), 1) * torch.log_softmax(mm, 1)).sum() + \
        (torch.exp(torch.tanh(x)) * torch.tanh(x)).sum()


v_out = ((torch.arange(6.0) / 3 - 0.8).reshape(3, 2), torch.arange(3.0) / 2 - 0.4)
v_in = ((torch.arange(12.0) / 11 - 0.3).reshape(3, 4), (torch.arange(8.0) / 4 - 1).reshape(4, 2))

refs = {}
out, r = AF.vjp(g, inputs(), v_out)
refs["kOut0"], refs["kOut1"] = out
refs["kVjpX"], refs["kVjpW"] = r
_, r = AF.jvp(g, inputs(), v_in)
refs["kJvp0"], refs["kJvp1"] = r
out, r = AF.vhp(s, inputs(), v_in)
refs["kScalar"] = out
refs["kVhpX"], refs["kVhpW"] = r
_, r = AF.hvp(s, inputs(), v_in)
refs["kHvpX"], refs["kHvpW"] = r
J = AF.jacobian(g, inputs())
for i in range(2):
    for j in range(2):
        refs[f"kJac{i}{j}"] = J[i][j]
H = AF.hessian(s, inputs())
for i in range(2):
    for j in range(2):
        refs[f"kHess{i}{j}"] = H[i][j]
# Third order: d/dx of sum(hvp(s, (x, w), v, create_graph=True)[w]) and of sum(J[0][1]).
x, w = inputs()
x.requires_grad_()
_, r = AF.hvp(s, (x, w), v_in, create_graph=True)
refs["kHvpWGradX"], = torch.autograd.grad(r[1].sum(), x)
J = AF.jacobian(g, (x, w), create_graph=True)
refs["kJac01GradX"], = torch.autograd.grad(J[0][1].sum(), x)

print(f"// The torch.autograd.functional reference values of torch_functional_references.py")
print(f"// (torch {torch.__version__.split('+')[0]}, CPU, float64, printed in full), for "
      "test_autograd_functional.cc.")
print("#pragma once\n\n#include <cstdint>\n#include <vector>\n")
print("namespace dtensor::test::functional_refs {\n")
for name, t in refs.items():
    print(f"// {name}: shape {list(t.shape)}")
    vals = ", ".join(repr(v) for v in t.detach().flatten().tolist())
    print(f"inline const std::vector<double> {name} = {{{vals}}};")
print("\n}  // namespace dtensor::test::functional_refs")

# The error messages the C++ test checks (printed to stderr, not in the .inc).
import sys
try:
    AF.vjp(lambda x, w: torch.tanh(x), inputs(), torch.ones(3, 4), strict=True)
except RuntimeError as e:
    print("strict vjp:", e, file=sys.stderr)
try:
    AF.hessian(g, inputs())
except RuntimeError as e:
    print("hessian non-scalar:", e, file=sys.stderr)
try:
    AF.vjp(g, inputs())
except RuntimeError as e:
    print("vjp no v:", e, file=sys.stderr)
