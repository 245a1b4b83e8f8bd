"""PyTorch 2.15's raise / no raise when a tensor is written in place between an op's forward and
its backward, in the format test_saved_tensor_versions prints (DTENSOR_SAVED_TABLE=1):
"op: in0 R, in1 -, out0 R" (R: backward raises "modified by an inplace operation", -: it does
not). Inputs are non-leaf copies (x = leaf * 1), written with x.mul_(-2).add_(0.5) (integer
tensors: mul_(1)); outputs likewise. Ops whose torch counterpart is clear only.

Compare (any venv with torch; the differences listed in docs/SEMANTICS.md, round 5, are from
torch 2.15.0+cu132, CPU, float64):
  DTENSOR_SAVED_TABLE=1 build/tests/autograd/test_saved_tensor_versions | grep ': ' > ours.txt
  python tests/autograd/torch_saved_tensor_references.py --compare ours.txt
Without --compare it prints PyTorch's table.
"""
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)


def r(*shape, pos=False):
    t = torch.rand(*shape) + 0.5 if pos else torch.randn(*shape)
    return t


def idx(high, *shape):
    return torch.randint(0, high, shape)


U = lambda: [r(4, 3)]
P = lambda: [r(4, 3, pos=True)]
B = lambda: [r(4, 3), r(4, 3)]
# name -> (inputs maker, function of the inputs)
OPS = {
    "add": (B, torch.add), "sub": (B, torch.sub), "mul": (B, torch.mul), "div": (B, torch.div),
    "maximum": (B, torch.maximum), "minimum": (B, torch.minimum),
    "add.Scalar": (U, lambda x: x + 2), "sub.Scalar": (U, lambda x: x - 2),
    "rsub.Scalar": (U, lambda x: 2 - x), "mul.Scalar": (U, lambda x: x * 2),
    "div.Scalar": (U, lambda x: x / 2), "rdiv.Scalar": (U, lambda x: 2 / x),
    "pow": (P, lambda x: x ** 2.5), "neg": (U, torch.neg), "abs": (U, torch.abs),
    "relu": (U, torch.relu), "silu": (U, F.silu), "gelu": (U, F.gelu), "exp": (U, torch.exp),
    "log": (P, torch.log), "sqrt": (P, torch.sqrt), "rsqrt": (P, torch.rsqrt),
    "sigmoid": (U, torch.sigmoid), "tanh": (U, torch.tanh), "sin": (U, torch.sin),
    "cos": (U, torch.cos), "tan": (U, torch.tan), "erf": (U, torch.erf),
    "erfinv": (lambda: [r(4, 3).clamp(-0.9, 0.9)], torch.erfinv), "sinh": (U, torch.sinh),
    "cosh": (U, torch.cosh), "asin": (lambda: [r(4, 3).clamp(-0.9, 0.9)], torch.asin),
    "acos": (lambda: [r(4, 3).clamp(-0.9, 0.9)], torch.acos), "atan": (U, torch.atan),
    "asinh": (U, torch.asinh), "acosh": (lambda: [r(4, 3, pos=True) + 1], torch.acosh),
    "atanh": (lambda: [r(4, 3).clamp(-0.9, 0.9)], torch.atanh), "erfc": (U, torch.erfc),
    "log_sigmoid": (U, F.logsigmoid), "hardsigmoid": (U, F.hardsigmoid),
    "hardswish": (U, F.hardswish), "mish": (U, F.mish), "selu": (U, F.selu),
    "relu6": (U, F.relu6), "softplus": (U, F.softplus), "elu": (U, F.elu), "celu": (U, F.celu),
    "leaky_relu": (U, F.leaky_relu), "glu": (lambda: [r(4, 4)], F.glu),
    "exp2": (U, torch.exp2), "expm1": (U, torch.expm1), "log1p": (P, torch.log1p),
    "log2": (P, torch.log2), "log10": (P, torch.log10), "reciprocal": (P, torch.reciprocal),
    "floor": (U, torch.floor), "ceil": (U, torch.ceil), "round": (U, torch.round),
    "trunc": (U, torch.trunc), "frac": (U, torch.frac), "sign": (U, torch.sign),
    "square": (U, torch.square), "pow.Tensor": (lambda: [r(4, 3, pos=True), r(4, 3)], torch.pow),
    "fmod": (B, torch.fmod), "remainder": (B, torch.remainder),
    "fmod.Scalar": (U, lambda x: torch.fmod(x, 1.5)),
    "remainder.Scalar": (U, lambda x: torch.remainder(x, 1.5)), "atan2": (B, torch.atan2),
    "hypot": (B, torch.hypot), "logaddexp": (B, torch.logaddexp),
    "xlogy": (lambda: [r(4, 3), r(4, 3, pos=True)], torch.xlogy),
    "copysign": (B, torch.copysign), "clamp": (U, lambda x: x.clamp(-0.5, 0.5)),
    "clamp_min": (U, lambda x: x.clamp_min(0.1)), "clamp_max": (U, lambda x: x.clamp_max(0.1)),
    "clamp.Tensor": (lambda: [r(4, 3), r(4, 3) - 1, r(4, 3) + 1], torch.clamp),
    "nan_to_num": (U, torch.nan_to_num),
    "lerp.Scalar": (B, lambda a, b: torch.lerp(a, b, 0.3)),
    "lerp": (lambda: [r(4, 3), r(4, 3), r(4, 3)], torch.lerp),
    "addcmul": (lambda: [r(4, 3), r(4, 3), r(4, 3)], lambda a, b, c: torch.addcmul(a, b, c, value=0.5)),
    "addcdiv": (lambda: [r(4, 3), r(4, 3), r(4, 3, pos=True)], lambda a, b, c: torch.addcdiv(a, b, c, value=0.5)),
    "cast": (U, lambda x: x.to(torch.float32)),
    "sum": (U, torch.sum), "mean": (U, torch.mean), "var": (U, torch.var),
    "amax": (U, lambda x: x.amax(1)), "amin": (U, lambda x: x.amin(1)), "max": (U, torch.max),
    "min": (U, torch.min), "max.dim": (U, lambda x: tuple(x.max(1))),
    "min.dim": (U, lambda x: tuple(x.min(1))), "std": (U, torch.std),
    "var_mean": (U, lambda x: tuple(torch.var_mean(x, 1))),
    "std_mean": (U, lambda x: tuple(torch.std_mean(x, 1))),
    "logsumexp": (U, lambda x: x.logsumexp(1)), "vector_norm": (U, torch.linalg.vector_norm),
    "prod": (U, torch.prod), "prod.dim_int": (U, lambda x: x.prod(1)),
    "mm": (lambda: [r(4, 3), r(3, 5)], torch.mm), "bmm": (lambda: [r(2, 4, 3), r(2, 3, 5)], torch.bmm),
    "matmul": (lambda: [r(4, 3), r(3, 5)], torch.matmul), "dot": (lambda: [r(3), r(3)], torch.dot),
    "outer": (lambda: [r(3), r(4)], torch.outer),
    "addmm": (lambda: [r(4, 5), r(4, 3), r(3, 5)], torch.addmm),
    "baddbmm": (lambda: [r(2, 4, 5), r(2, 4, 3), r(2, 3, 5)], torch.baddbmm),
    "linear": (lambda: [r(4, 3), r(5, 3)], F.linear),
    "linear.bias": (lambda: [r(4, 3), r(5, 3), r(5)], F.linear),
    "cat": (lambda: [r(2, 3), r(2, 3), r(2, 3)], lambda *a: torch.cat(a)),
    "stack": (B, lambda *a: torch.stack(a)), "clone": (U, torch.clone),
    "flip": (U, lambda x: x.flip(0)), "roll": (U, lambda x: x.roll(1, 0)),
    "repeat": (U, lambda x: x.repeat(2, 1)), "tril": (U, torch.tril), "triu": (U, torch.triu),
    "softmax": (U, lambda x: x.softmax(1)), "log_softmax": (U, lambda x: x.log_softmax(1)),
    "softmin": (U, lambda x: F.softmin(x, 1)),
    "layer_norm": (lambda: [r(4, 3), r(3), r(3)], lambda x, w, b: F.layer_norm(x, (3,), w, b)),
    "rms_norm": (lambda: [r(4, 3), r(3)], lambda x, w: F.rms_norm(x, (3,), w)),
    "group_norm": (lambda: [r(2, 4, 3), r(4), r(4)], lambda x, w, b: F.group_norm(x, 2, w, b)),
    "embedding": (lambda: [r(5, 3), idx(5, 4)], lambda w, i: F.embedding(i, w)),
    "gather": (lambda: [r(4, 3), idx(3, 4, 2)], lambda x, i: x.gather(1, i)),
    "scatter_add": (lambda: [r(4, 3), idx(3, 4, 2), r(4, 2)], lambda x, i, s: x.scatter_add(1, i, s)),
    "index_add": (lambda: [r(4, 3), idx(4, 2), r(2, 3)], lambda x, i, s: x.index_add(0, i, s)),
    "mse_loss": (B, F.mse_loss), "l1_loss": (B, F.l1_loss), "smooth_l1_loss": (B, F.smooth_l1_loss),
    "huber_loss": (B, F.huber_loss),
    "binary_cross_entropy": (lambda: [torch.rand(4, 3) * 0.8 + 0.1, torch.rand(4, 3)],
                             F.binary_cross_entropy),
    "kl_div": (B, lambda a, b: F.kl_div(a, b, log_target=True)),
    "nll_loss": (lambda: [r(4, 3), idx(3, 4)], F.nll_loss),
    "cumsum": (U, lambda x: x.cumsum(1)), "cumprod": (U, lambda x: x.cumprod(1)),
    "sort": (U, lambda x: tuple(x.sort(1))), "cummax": (U, lambda x: tuple(x.cummax(1))),
    "cummin": (U, lambda x: tuple(x.cummin(1))), "topk": (U, lambda x: tuple(x.topk(2, 1))),
    "kthvalue": (U, lambda x: tuple(x.kthvalue(2, 1))),
    "logcumsumexp": (U, lambda x: x.logcumsumexp(1)),
    "median.dim": (U, lambda x: tuple(x.median(1))), "mode": (U, lambda x: tuple(x.mode(1))),
    "median": (U, torch.median),
    "scaled_dot_product_attention": (lambda: [r(1, 2, 4, 3), r(1, 2, 4, 3), r(1, 2, 4, 3)],
                                     F.scaled_dot_product_attention),
    "cdist": (lambda: [r(4, 3), r(5, 3)], torch.cdist),
    "convolution": (lambda: [r(1, 2, 5), r(3, 2, 2)], F.conv1d),
    "max_pool1d_with_indices": (lambda: [r(1, 2, 6)], lambda x: tuple(F.max_pool1d(x, 2, return_indices=True))),
    "avg_pool1d": (lambda: [r(1, 2, 6)], lambda x: F.avg_pool1d(x, 2)),
    "max_pool2d_with_indices": (lambda: [r(1, 2, 4, 4)], lambda x: tuple(F.max_pool2d(x, 2, return_indices=True))),
    "avg_pool2d": (lambda: [r(1, 2, 4, 4)], lambda x: F.avg_pool2d(x, 2)),
    "upsample_nearest1d": (lambda: [r(1, 2, 3)], lambda x: F.interpolate(x, scale_factor=2)),
    "upsample_linear1d": (lambda: [r(1, 2, 3)], lambda x: F.interpolate(x, scale_factor=2, mode="linear")),
    "adaptive_avg_pool2d": (lambda: [r(1, 2, 4, 4)], lambda x: F.adaptive_avg_pool2d(x, 2)),
    "adaptive_max_pool2d": (lambda: [r(1, 2, 4, 4)], lambda x: tuple(F.adaptive_max_pool2d(x, 2, return_indices=True))),
    "pad": (U, lambda x: F.pad(x, (1, 1))),
}


def write(t):
    if t.is_floating_point():
        t.mul_(-2).add_(0.5)
    else:
        t.mul_(1)


def outcome(make, f, target, which):
    torch.manual_seed(1)
    vals = make()
    leaves = [v.clone().requires_grad_(v.is_floating_point()) for v in vals]
    ins = [l * 1 if l.is_floating_point() else l for l in leaves]
    outs = f(*ins)
    outs = outs if isinstance(outs, tuple) else (outs,)
    try:
        write(ins[target] if which == "in" else outs[target])
    except RuntimeError:
        return "refused"
    roots = [o for o in outs if o.requires_grad]
    try:
        torch.autograd.backward(roots, [torch.ones_like(o) for o in roots])
    except RuntimeError as e:
        return "R" if "modified by an inplace operation" in str(e) else "error"
    return "-"


def table():
    rows = {}
    for name, (make, f) in OPS.items():
        torch.manual_seed(1)
        n_in = len(make())
        outs = f(*[v for v in make()])
        n_out = len(outs) if isinstance(outs, tuple) else 1
        cells = [f"in{i} {outcome(make, f, i, 'in')}" for i in range(n_in)]
        cells += [f"out{o} {outcome(make, f, o, 'out')}" for o in range(n_out)]
        rows[name] = cells
    return rows


def parse(path):
    rows = {}
    for line in open(path):
        if ": " not in line:
            continue
        name, rest = line.strip().split(": ", 1)
        rows[name] = [c for c in rest.split(", ") if "/" not in c]
    return rows


if __name__ == "__main__":
    print("torch", torch.__version__, file=sys.stderr)
    ref = table()
    if len(sys.argv) > 2 and sys.argv[1] == "--compare":
        ours = parse(sys.argv[2])
        same = 0
        for name, cells in ref.items():
            if name not in ours:
                print(f"{name}: not in dtensor's table")
                continue
            mine = dict(c.split() for c in ours[name])
            diff = [f"{label}: torch {got}, dtensor {mine[label]}"
                    for label, got in (c.split() for c in cells)
                    if label in mine and mine[label] != got]
            if diff:
                print(f"{name}: " + "; ".join(diff))
            else:
                same += 1
        print(f"{same} of {len(ref)} ops agree")
    else:
        for name, cells in ref.items():
            print(f"{name}: " + ", ".join(cells))
