"""Reference gradients of PyTorch at the kinks and edge cases dtensor follows (issue 39):
hardswish at +-3, clamp / clamp_min / clamp_max / clip at their bounds, clamp with tensor
bounds (ties split), cross_entropy mean with every target ignored, scatter_reduce amax / amin
ties with include_self=False (where dtensor keeps its own rule), std on constant rows, atan2 at
the origin.

Run: python tests/ops/torch_grad_conventions.py (any venv with torch; the values committed in
the tests are from torch 2.15.0+cu132, CPU, float64). Each block names the test that holds it.
"""
import itertools
import warnings

import torch

warnings.filterwarnings("ignore")
torch.set_default_dtype(torch.float64)
F = torch.nn.functional
inf, nan = float("inf"), float("nan")


def grad_of(f, *inputs, upstream=None):
    ts = [torch.tensor(v, requires_grad=True) for v in inputs]
    y = f(*ts)
    y.backward(torch.ones_like(y) if upstream is None else torch.full_like(y, upstream))
    return [t.grad.tolist() for t in ts]


print("torch", torch.__version__)

# tests/ops/elementwise/test_elementwise_dtensor.cc, "gradients at the kinks ..."
hs = [-4., -3., -1., 0., 1., 3., 4., nan]
print("hardswish", grad_of(F.hardswish, hs))
print("hardswish, upstream inf (not followed: docs/SEMANTICS.md, Gradients)", grad_of(F.hardswish, hs, upstream=inf))
xs = [-2., -1., 0., 1., 2., nan]
print("clamp(-1, 1)", grad_of(lambda x: torch.clamp(x, -1., 1.), xs))
print("clamp(-1, 1), upstream inf (not followed)", grad_of(lambda x: torch.clamp(x, -1., 1.), xs, upstream=inf))
print("clamp_min(-1)", grad_of(lambda x: torch.clamp_min(x, -1.), xs))
print("clamp_max(1)", grad_of(lambda x: torch.clamp_max(x, 1.), xs))
print("clip(-1, 1)", grad_of(lambda x: torch.clip(x, -1., 1.), xs))
print("clamp(1, 1)", grad_of(lambda x: torch.clamp(x, 1., 1.), xs))
print("clamp(1, -1)", grad_of(lambda x: torch.clamp(x, 1., -1.), xs))
# Tensor bounds: every (x, min, max) in {0, 1, 2}^3, then NaN in each place.
grid = list(itertools.product([0., 1., 2.], repeat=3)) + [
    (nan, 0., 1.), (nan, 1., 0.), (0., nan, 1.), (2., nan, 1.), (0., 1., nan), (2., 1., nan)]
gx, glo, ghi = grad_of(torch.clamp, *[[p[i] for p in grid] for i in range(3)])
print("clamp tensor cases", grid)
print("clamp tensor x", gx)
print("clamp tensor min", glo)
print("clamp tensor max", ghi)
print("atan2 at the origin (y, x) = (0, 0), (1e-170, 0), (0, 1e-170), (1, 0), (-2, 3)",
      grad_of(torch.atan2, [0., 1e-170, 0., 1., -2.], [0., 0., 1e-170, 0., 3.]))
# test_elementwise_dtensor.cc, "gradients at the kinks ...": maximum / minimum with a NaN.
print("maximum / minimum at (nan, 1), (2, nan), (1, 1), (1, 2), (nan, nan)",
      grad_of(torch.maximum, [nan, 2., 1., 1., nan], [1., nan, 1., 2., nan]),
      grad_of(torch.minimum, [nan, 2., 1., 1., nan], [1., nan, 1., 2., nan]))
# test_elementwise_dtensor.cc, "gradients at the kinks ...": remainder's divisor.
print("remainder at (1, 0.1), (-1, 0.1), (3, 0.3), (0.7, 0.1), (-1, inf), (5, 0), (5, -3)",
      grad_of(torch.remainder, [1., -1., 3., 0.7, -1., 5., 5.], [0.1, 0.1, 0.3, 0.1, inf, 0., -3.]))
print("clamp tensor broadcast",
      grad_of(torch.clamp, [[-1., 0., 1.], [0.5, -1., 1.]], [-1.], [1.]))

# tests/ops/loss/test_loss_dtensor_mpi.cc, "... every target ignored ..."
logits = torch.arange(12.).reshape(3, 4).mul(0.25).requires_grad_()
for smoothing in (0.0, 0.1):
    logits.grad = None
    loss = F.cross_entropy(logits, torch.tensor([-100, -100, -100]), label_smoothing=smoothing)
    loss.backward()
    print("cross_entropy mean, all ignored, smoothing", smoothing, loss.item(),
          logits.grad.tolist())

# tests/ops/index/test_index_dtensor_mpi.cc, "scatter_reduce gradients ..."
idx = torch.tensor([[0, 0, 1], [2, 2, 2]])
tied = torch.tensor([[1., 2., 3.], [4., 5., 6.]])
tied_src = torch.tensor([[1., 1., 0.], [6., 2., 6.]])
for reduce, sign in (("amax", 1.), ("amin", -1.)):
    for include_self in (True, False):
        s = (sign * tied).requires_grad_()
        v = (sign * tied_src).requires_grad_()
        s.scatter_reduce(1, idx, v, reduce, include_self=include_self).sum().backward()
        print("scatter_reduce", reduce, "include_self", include_self, "self", s.grad.tolist(),
              "src", v.grad.tolist())

# tests/ops/reduction/test_reduction_dtensor.cc, "std's gradient ..."
print("std rows", grad_of(lambda x: torch.std(x, dim=1), [[2., 2., 2.], [1., 2., 3.]]))

# tests/ops/reduction/test_reduction_dtensor.cc, "gradients at n <= correction, NaN extremes and
# zero elements of p < 2 norms are PyTorch's" (round 3 of the parity hunt)
print("max() / min() with NaNs", grad_of(torch.max, [1., nan, 3., nan]), grad_of(torch.min, [1., nan, 3.]))
print("amax with a NaN", grad_of(torch.amax, [1., nan, 3.]))
print("var() / std() over every dim, n <= correction",
      [grad_of(lambda x: torch.var(x, correction=k), [1., 2.]) for k in (2, 3)],
      [grad_of(lambda x: torch.std(x, correction=k), [1., 2.]) for k in (2, 3)],
      grad_of(lambda x: torch.var(x, correction=2), [2., 2.]),
      grad_of(lambda x: torch.var(x, correction=2), [1., float("inf")]))
print("var / std along dim 1, n <= correction",
      grad_of(lambda x: torch.var(x, 1, correction=2), [[1., 2.]]),
      grad_of(lambda x: torch.std(x, 1, correction=1), [[1.], [2.]]),
      grad_of(lambda x: torch.std(x, 1, correction=3), [[1., 2.]]))
print("std_mean, n = correction", grad_of(lambda x: sum(torch.std_mean(x, 1, correction=1)), [[1.], [2.]]))
print("vector_norm ord 0.5 / 1.5 / -1 with zeros",
      [grad_of(lambda x: torch.linalg.vector_norm(x, o), [0., 1., 4.]) for o in (0.5, 1.5, -1.)])
print("dist p 0.5 with an equal component", grad_of(lambda a, b: torch.dist(a, b, 0.5), [1., 2., 3.], [1., 0., 3.5]))
# tests/ops/elementwise/test_elementwise_dtensor.cc, "pow of an int32 base with a float64 exponent
# ...": the exponent's gradient x^e log(x) in float64 (log of the int base taken in float64).
e = torch.tensor([2., 0.5, -1.], requires_grad=True)
torch.pow(torch.tensor([1, 2, 4], dtype=torch.int32), e).sum().backward()
print("pow(int32 [1, 2, 4], float64 [2, 0.5, -1]), exponent grad", [repr(v) for v in e.grad.tolist()])
# tests/ops/pool/test_pool.cc, "circular padding with negative pads ...": PyTorch crops first,
# then wraps around what is left.
x = torch.arange(1., 5.).reshape(1, 1, 4).requires_grad_()
for pads in ((-1, 2), (1, -2), (3, -1)):
    x.grad = None
    y = F.pad(x, pads, "circular")
    y.backward(torch.arange(1., y.numel() + 1).reshape(y.shape))
    print("pad circular", pads, y.flatten().tolist(), "grad, upstream 1..n", x.grad.flatten().tolist())
# tests/ops/view/test_view_dtensor_mpi.cc, "cat and stack promote mixed dtypes ...".
a = torch.tensor([1., 2.], dtype=torch.float32, requires_grad=True)
b = torch.tensor([0.5], requires_grad=True)
y = torch.cat([a, b])
y.backward(torch.tensor([1., 2., 3.]))
print("cat float32 + float64", y.dtype, y.tolist(), a.grad.dtype, a.grad.tolist(), b.grad.tolist())
print("cat int32 + float64", torch.cat([torch.tensor([1, 2], dtype=torch.int32), torch.tensor([0.5])]).dtype,
      "stack bool + int64", torch.stack([torch.tensor([True, False]), torch.tensor([3, 4])]).tolist())
# tests/ops/elementwise/test_elementwise_math.cc, "addcmul on integers ...": value is converted
# to the integer type (truncated), the result stays int64.
for v in (0.5, 1.5, -1.5):
    print("addcmul int64 value", v, torch.addcmul(torch.tensor([1, 2]), torch.tensor([3, 4]),
                                                  torch.tensor([2, 2]), value=v).tolist())
# tests/ops/reduction/test_reduction_dtensor.cc, "mean of float16 / bfloat16 sums in float32":
print("mean float16 [60000, 60000]", torch.tensor([60000., 60000.], dtype=torch.float16).mean().item(),
      "bfloat16 [3e38, 3e38]", torch.tensor([3e38, 3e38], dtype=torch.bfloat16).mean().item())
# tests/ops/elementwise/test_elementwise_dtensor.cc, "comparisons of 16-bit floats with a scalar
# ...": the scalar is rounded to the tensor's dtype first (arithmetic keeps it in float).
h = torch.tensor([0.1, 0.2], dtype=torch.float16)
bf = torch.tensor([0.1, 0.2], dtype=torch.bfloat16)
print("float16 [0.1, 0.2] == 0.1", (h == 0.1).tolist(), "< 0.1", (h < 0.1).tolist(),
      "bfloat16 == 0.1", (bf == 0.1).tolist(), ">= 0.1", (bf >= 0.1).tolist())
# test_elementwise_dtensor.cc, "clamp with one tensor bound ...": clamp(x, min) / clamp(x, None, max)
print("clamp(x, min tensor)", grad_of(lambda x, m: torch.clamp(x, m, None), [1., 2., 3., nan], [2., 2., 2., 2.]))
print("clamp(x, None, max tensor)", grad_of(lambda x, m: torch.clamp(x, None, m), [1., 2., 3., nan], [2., 2., 2., 2.]))
# tests/ops/elementwise/test_elementwise_math.cc and test_elementwise_dtensor.cc: square / sign of bool.
b = torch.tensor([True, False])
print("square(bool)", torch.square(b).dtype, torch.square(b).tolist(), "sign(bool)", torch.sign(b).dtype, torch.sign(b).tolist())
