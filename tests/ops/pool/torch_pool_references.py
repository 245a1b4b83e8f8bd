"""PyTorch reference values and gradients of the pool family's ops (tests/ops/pool/test_pool.cc,
"... match PyTorch 2.15 ..."): pad (every mode), max_pool{1,2,3}d (padding, dilation,
ceil_mode, indices), avg_pool{1,2,3}d (count_include_pad, ceil_mode, divisor_override),
adaptive_avg_pool{1,2}d, adaptive_max_pool2d and interpolate (nearest, nearest-exact, linear,
bilinear, bicubic, trilinear; size or scale_factor; align_corners both ways), float64.

Run from outside the repository (the values committed are from torch 2.15, CPU):
  cd /tmp && /root/venv/bin/python /work/main/tests/ops/pool/torch_pool_references.py \
      > /work/main/tests/ops/pool/torch_pool_references.h
Inputs: X1 [1, 2, 9], X2 [2, 1, 7, 6], X3 [1, 1, 5, 4, 6], element i = 2 sin(0.7 i + 0.3); the
gradients are of sum(upstream * out), upstream element i = cos(0.3 i + 0.1).
"""
import math

import torch

torch.set_default_dtype(torch.float64)
F = torch.nn.functional

SHAPES = {1: [1, 2, 9], 2: [2, 1, 7, 6], 3: [1, 1, 5, 4, 6]}


def inp(k):
    n = math.prod(SHAPES[k])
    return torch.tensor([2 * math.sin(0.7 * i + 0.3) for i in range(n)]).reshape(SHAPES[k])


# (input, C++ call on x, Python call on x, C++ indices call or None)
CASES = [
    (1, "dt::max_pool1d(x, {3}, {2}, {1}, {1}, false)", lambda x: F.max_pool1d(x, 3, 2, 1, 1, False),
     "dt::max_pool1d_with_indices(x, {3}, {2}, {1}, {1}, false).indices",
     lambda x: F.max_pool1d(x, 3, 2, 1, 1, False, return_indices=True)[1]),
    (1, "dt::max_pool1d(x, {2}, {}, {1}, {2}, true)", lambda x: F.max_pool1d(x, 2, None, 1, 2, True),
     None, None),
    (2, "dt::max_pool2d(x, {3}, {2}, {1}, {1}, true)", lambda x: F.max_pool2d(x, 3, 2, 1, 1, True),
     "dt::max_pool2d_with_indices(x, {3}, {2}, {1}, {1}, true).indices",
     lambda x: F.max_pool2d(x, 3, 2, 1, 1, True, return_indices=True)[1]),
    (2, "dt::max_pool2d(x, {2, 3}, {1, 2}, {0, 1}, {2, 1}, false)",
     lambda x: F.max_pool2d(x, (2, 3), (1, 2), (0, 1), (2, 1), False), None, None),
    (3, "dt::max_pool3d(x, {2}, {}, {0}, {1}, false)", lambda x: F.max_pool3d(x, 2),
     "dt::max_pool3d_with_indices(x, {2}, {}, {0}, {1}, false).indices",
     lambda x: F.max_pool3d(x, 2, return_indices=True)[1]),
    (3, "dt::max_pool3d(x, {3, 2, 3}, {2, 2, 1}, {1, 0, 1}, {1}, true)",
     lambda x: F.max_pool3d(x, (3, 2, 3), (2, 2, 1), (1, 0, 1), 1, True), None, None),
    (1, "dt::avg_pool1d(x, {3}, {2}, {1}, true, false)", lambda x: F.avg_pool1d(x, 3, 2, 1, True, False),
     None, None),
    (1, "dt::avg_pool1d(x, {4}, {}, {2}, false, true)", lambda x: F.avg_pool1d(x, 4, None, 2, False, True),
     None, None),
    (2, "dt::avg_pool2d(x, {3}, {2}, {1}, true, true)", lambda x: F.avg_pool2d(x, 3, 2, 1, True, True),
     None, None),
    (2, "dt::avg_pool2d(x, {3, 2}, {2, 1}, {1, 0}, false, false)",
     lambda x: F.avg_pool2d(x, (3, 2), (2, 1), (1, 0), False, False), None, None),
    (2, "dt::avg_pool2d(x, {2}, {}, {0}, false, true, 3)",
     lambda x: F.avg_pool2d(x, 2, None, 0, False, True, 3), None, None),
    (3, "dt::avg_pool3d(x, {2}, {}, {1}, true, false)", lambda x: F.avg_pool3d(x, 2, None, 1, True, False),
     None, None),
    (3, "dt::avg_pool3d(x, {3}, {2}, {1}, false, true, 7)",
     lambda x: F.avg_pool3d(x, 3, 2, 1, False, True, 7), None, None),
    (1, "dt::adaptive_avg_pool1d(x, {4})", lambda x: F.adaptive_avg_pool1d(x, 4), None, None),
    (2, "dt::adaptive_avg_pool2d(x, {3, 4})", lambda x: F.adaptive_avg_pool2d(x, (3, 4)), None, None),
    (2, "dt::adaptive_avg_pool2d(x, {1})", lambda x: F.adaptive_avg_pool2d(x, 1), None, None),
    (2, "dt::adaptive_max_pool2d(x, {3, 4})", lambda x: F.adaptive_max_pool2d(x, (3, 4)),
     "dt::adaptive_max_pool2d_with_indices(x, {3, 4}).indices",
     lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True)[1]),
    (2, "dt::adaptive_max_pool2d(x, {5, 4})", lambda x: F.adaptive_max_pool2d(x, (5, 4)), None, None),
    (1, "dt::interpolate(x, {13})", lambda x: F.interpolate(x, 13), None, None),
    (1, "dt::interpolate(x, {}, {1.7})", lambda x: F.interpolate(x, scale_factor=1.7), None, None),
    (1, "dt::interpolate(x, {14}, {}, \"linear\", true)",
     lambda x: F.interpolate(x, 14, mode="linear", align_corners=True), None, None),
    (1, "dt::interpolate(x, {}, {2.5}, \"linear\")",
     lambda x: F.interpolate(x, scale_factor=2.5, mode="linear"), None, None),
    (1, "dt::interpolate(x, {4}, {}, \"linear\", false)",
     lambda x: F.interpolate(x, 4, mode="linear", align_corners=False), None, None),
    (2, "dt::interpolate(x, {10, 4})", lambda x: F.interpolate(x, (10, 4)), None, None),
    (2, "dt::interpolate(x, {}, {1.5, 2.0})", lambda x: F.interpolate(x, scale_factor=(1.5, 2.0)),
     None, None),
    (2, "dt::interpolate(x, {9, 11}, {}, \"bilinear\", true)",
     lambda x: F.interpolate(x, (9, 11), mode="bilinear", align_corners=True), None, None),
    (2, "dt::interpolate(x, {9, 11}, {}, \"bilinear\", false)",
     lambda x: F.interpolate(x, (9, 11), mode="bilinear", align_corners=False), None, None),
    (2, "dt::interpolate(x, {}, {0.6}, \"bilinear\")",
     lambda x: F.interpolate(x, scale_factor=0.6, mode="bilinear"), None, None),
    (2, "dt::interpolate(x, {1, 1}, {}, \"bilinear\", true)",
     lambda x: F.interpolate(x, (1, 1), mode="bilinear", align_corners=True), None, None),
    (3, "dt::interpolate(x, {}, {2.0})", lambda x: F.interpolate(x, scale_factor=2.0), None, None),
    (3, "dt::interpolate(x, {7, 5, 9}, {}, \"trilinear\")",
     lambda x: F.interpolate(x, (7, 5, 9), mode="trilinear"), None, None),
    # nearest-exact and bicubic (task L item 5): sizes up, down, twice, and a scale.
    (1, "dt::interpolate(x, {13}, {}, \"nearest-exact\")",
     lambda x: F.interpolate(x, 13, mode="nearest-exact"), None, None),
    (1, "dt::interpolate(x, {18}, {}, \"nearest-exact\")",
     lambda x: F.interpolate(x, 18, mode="nearest-exact"), None, None),
    (2, "dt::interpolate(x, {}, {1.7, 0.6}, \"nearest-exact\")",
     lambda x: F.interpolate(x, scale_factor=(1.7, 0.6), mode="nearest-exact"), None, None),
    (3, "dt::interpolate(x, {4, 7, 3}, {}, \"nearest-exact\")",
     lambda x: F.interpolate(x, (4, 7, 3), mode="nearest-exact"), None, None),
    (2, "dt::interpolate(x, {9, 11}, {}, \"bicubic\", true)",
     lambda x: F.interpolate(x, (9, 11), mode="bicubic", align_corners=True), None, None),
    (2, "dt::interpolate(x, {9, 11}, {}, \"bicubic\", false)",
     lambda x: F.interpolate(x, (9, 11), mode="bicubic", align_corners=False), None, None),
    (2, "dt::interpolate(x, {}, {0.6, 2.5}, \"bicubic\")",
     lambda x: F.interpolate(x, scale_factor=(0.6, 2.5), mode="bicubic"), None, None),
    (2, "dt::interpolate(x, {1, 3}, {}, \"bicubic\", true)",
     lambda x: F.interpolate(x, (1, 3), mode="bicubic", align_corners=True), None, None),
    (1, "dt::pad(x, {3, 2}, \"reflect\")", lambda x: F.pad(x, (3, 2), "reflect"), None, None),
    (1, "dt::pad(x, {2, 4}, \"replicate\")", lambda x: F.pad(x, (2, 4), "replicate"), None, None),
    (1, "dt::pad(x, {3, 1}, \"circular\")", lambda x: F.pad(x, (3, 1), "circular"), None, None),
    (1, "dt::pad(x, {2, -1}, \"constant\", 0.5)", lambda x: F.pad(x, (2, -1), "constant", 0.5),
     None, None),
    (2, "dt::pad(x, {1, 2, 3, 1}, \"reflect\")", lambda x: F.pad(x, (1, 2, 3, 1), "reflect"), None, None),
    (2, "dt::pad(x, {2, 0, 1, 3}, \"replicate\")", lambda x: F.pad(x, (2, 0, 1, 3), "replicate"),
     None, None),
    (2, "dt::pad(x, {1, 2, 2, 1}, \"circular\")", lambda x: F.pad(x, (1, 2, 2, 1), "circular"),
     None, None),
    (2, "dt::pad(x, {1, 1, 2, 2, 1, 0}, \"constant\", -1.0)",
     lambda x: F.pad(x, (1, 1, 2, 2, 1, 0), "constant", -1.0), None, None),
    (3, "dt::pad(x, {1, 1, 2, 0, 1, 2}, \"reflect\")", lambda x: F.pad(x, (1, 1, 2, 0, 1, 2), "reflect"),
     None, None),
    (3, "dt::pad(x, {2, 1, 0, 3, 1, 1}, \"replicate\")",
     lambda x: F.pad(x, (2, 1, 0, 3, 1, 1), "replicate"), None, None),
    (3, "dt::pad(x, {1, 0, 2, 1, 0, 3}, \"circular\")",
     lambda x: F.pad(x, (1, 0, 2, 1, 0, 3), "circular"), None, None),
]


def fmt(values):
    return "{" + ", ".join("%.17g" % float(v) for v in values) + "}"


print("// Generated by tests/ops/pool/torch_pool_references.py (torch %s); do not edit." %
      torch.__version__)
print("// clang-format off")
print("#pragma once")
print("")
print("#include <array>")
print("#include <vector>")
print("")
print("#include \"dtensor/ops/pool/pool.h\"")
print("")
print("namespace pool_refs {")
print("namespace dt = dtensor;")
print("struct PoolRef {")
print("  const char* call;")
print("  int input;  // X1, X2 or X3")
print("  dt::Tensor (*local)(const dt::Tensor&);")
print("  dt::DTensor (*dist)(const dt::DTensor&);")
print("  dt::Tensor (*local_indices)(const dt::Tensor&);  // nullptr: none")
print("  std::vector<long> shape;")
print("  std::vector<double> value, grad, indices;")
print("};")
print("inline const std::vector<PoolRef>& refs() {")
print("  static const std::vector<PoolRef> r = {")
for k, call, f, icall, fi in CASES:
    x = inp(k).requires_grad_()
    out = f(x)
    up = torch.tensor([math.cos(0.3 * i + 0.1) for i in range(out.numel())]).reshape(out.shape)
    (out * up).sum().backward()
    idx = fi(inp(k)).flatten().tolist() if fi else []
    local_idx = ("[](const dt::Tensor& x) { return %s; }" % icall) if icall else "nullptr"
    print("    {%s, %d, [](const dt::Tensor& x) { return %s; }," % (
        '"' + call.replace('"', '\\"') + '"', k, call))
    print("     [](const dt::DTensor& x) { return %s; }, %s," % (call, local_idx))
    print("     %s," % ("{" + ", ".join(str(s) for s in out.shape) + "}"))
    print("     %s," % fmt(out.detach().flatten().tolist()))
    print("     %s," % fmt(x.grad.flatten().tolist()))
    print("     %s}," % fmt(idx))
print("  };")
print("  return r;")
print("}")

# nearest-exact's source index (PyTorch's backward and float32 forward: the float scale, the
# product rounded to float, floorf) at every input size 1..39 and output size 1..59, kept where it
# differs from floor((o + 0.5) * scale) taken in double (dtensor's first version): {in, out, o, src}.
def exact_sources(i, o):
    J = torch.autograd.functional.jacobian(
        lambda x: F.interpolate(x.view(1, 1, i), size=o, mode="nearest-exact").view(-1),
        torch.zeros(i))
    return [int(J[k].nonzero()[0]) for k in range(o)]


def double_floor_sources(i, o):
    scale = float(torch.tensor(i / o, dtype=torch.float32))
    return [min(math.floor((k + 0.5) * scale), i - 1) for k in range(o)]


def print_sweep(comment, name, rows, width, per_line):
    """Prints rows (strings "{...}") as `name`, a vector of width-int arrays."""
    print(comment)
    print("inline const std::vector<std::array<int, %d>>& %s() {" % (width, name))
    print("  static const std::vector<std::array<int, %d>> r = {" % width)
    for j in range(0, len(rows), per_line):
        print("    " + ", ".join(rows[j:j + per_line]) + ",")
    print("  };")
    print("  return r;")
    print("}")


sweep = []
for i in range(1, 40):
    for o in range(1, 60):
        got, naive = exact_sources(i, o), double_floor_sources(i, o)
        sweep += ["{%d, %d, %d, %d}" % (i, o, k, got[k]) for k in range(o) if got[k] != naive[k]]
print_sweep("// nearest-exact's source index where floor in double would pick another: "
            "{in, out, o, src}.", "nearest_exact_sources", sweep, 4, 6)

# Plain nearest: PyTorch's backward (every dtype and rank), its float32 forward and its 2-d float64
# forward take the float scale and floor(float(o) * scale); its 1-d and 3-d float64 forwards take a
# double scale and pick another source at a few sizes of 1..39 -> 1..59 (there its gradient is not
# the adjoint of its forward). Kept where the two differ: {in, out, o, backward's src, f64 1-d src}.
def nearest_backward_sources(i, o):
    g = torch.eye(o).reshape(1, o, o)
    x = torch.zeros(1, o, i, requires_grad=True)
    gi, = torch.autograd.grad(F.interpolate(x, size=o, mode="nearest"), x, g)
    return [int(gi[0, k].nonzero()[0]) for k in range(o)]


def nearest_f64_forward_sources(i, o):
    x = torch.arange(i, dtype=torch.float64).view(1, 1, i)
    return [int(v) for v in F.interpolate(x, size=o, mode="nearest").flatten().tolist()]


sweep = []
for i in range(1, 40):
    for o in range(1, 60):
        back, fwd = nearest_backward_sources(i, o), nearest_f64_forward_sources(i, o)
        sweep += ["{%d, %d, %d, %d, %d}" % (i, o, k, back[k], fwd[k]) for k in range(o)
                  if back[k] != fwd[k]]
print_sweep("// nearest: where PyTorch's float64 1-d forward leaves its backward's source:\n"
            "// {in, out, o, backward's src, f64 forward's src}.", "nearest_f64_forward_differs",
            sweep, 5, 5)
print("}  // namespace pool_refs")
print("// clang-format on")
