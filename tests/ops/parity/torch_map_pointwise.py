"""PyTorch's side of the elementwise family for the parity sweep (torch_parity.py): unary,
binary, tensor-scalar, activation, comparison, where / clamp, cast and in-place ops, and the
activations' gradient ops. MAP[op](inputs, args) as torch_parity.py describes; an in-place op
works on a clone of self (dtensor's run writes into a non-leaf copy)."""
import torch
import torch.nn.functional as F

aten = torch.ops.aten


def unary(fn):
    return lambda x, a: fn(x[0])


def binary(fn):
    return lambda x, a: fn(x[0], x[1])


def scalar(fn):
    """The Scalar forms: args (scalar, result dtype); PyTorch promotes by itself."""
    return lambda x, a: fn(x[0], a[0])


def inplace(method, with_scalar=False):
    if with_scalar:
        return lambda x, a: getattr(x[0].clone(), method)(a[0])
    return lambda x, a: getattr(x[0].clone(), method)(*x[1:])


GELU_APPROXIMATE = {0: "none", 1: "tanh"}

MAP = {
    # Tensor-tensor arithmetic and comparisons.
    "add": binary(torch.add),
    "sub": binary(torch.sub),
    "mul": binary(torch.mul),
    "div": binary(torch.div),
    "maximum": binary(torch.maximum),
    "minimum": binary(torch.minimum),
    "eq": binary(torch.eq),
    "ne": binary(torch.ne),
    "lt": binary(torch.lt),
    "le": binary(torch.le),
    "gt": binary(torch.gt),
    "ge": binary(torch.ge),
    "where": lambda x, a: torch.where(x[0], x[1], x[2]),
    # Tensor-scalar forms.
    "add.Scalar": scalar(torch.add),
    "sub.Scalar": scalar(torch.sub),
    "rsub.Scalar": scalar(torch.rsub),
    "mul.Scalar": scalar(torch.mul),
    "div.Scalar": scalar(torch.div),
    "rdiv.Scalar": lambda x, a: a[0] / x[0],
    "eq.Scalar": scalar(torch.eq),
    "ne.Scalar": scalar(torch.ne),
    "lt.Scalar": scalar(torch.lt),
    "le.Scalar": scalar(torch.le),
    "gt.Scalar": scalar(torch.gt),
    "ge.Scalar": scalar(torch.ge),
    "pow": scalar(torch.pow),
    "fmod.Scalar": scalar(torch.fmod),
    "remainder.Scalar": scalar(torch.remainder),
    "clamp_min": scalar(torch.clamp_min),
    "clamp_max": scalar(torch.clamp_max),
    "clamp": lambda x, a: torch.clamp(x[0], a[0], a[1]),
    "nan_to_num": lambda x, a: torch.nan_to_num(x[0], nan=a[0], posinf=a[1], neginf=a[2]),
    "masked_fill": lambda x, a: torch.masked_fill(x[0], x[1], a[0]),
    "lerp.Scalar": lambda x, a: torch.lerp(x[0], x[1], a[0]),
    "addcmul": lambda x, a: torch.addcmul(x[0], x[1], x[2], value=a[0]),
    "addcdiv": lambda x, a: torch.addcdiv(x[0], x[1], x[2], value=a[0]),
    "cast": lambda x, a: x[0].to(a[0]),
    # Unary math.
    "neg": unary(torch.neg),
    "abs": unary(torch.abs),
    "exp": unary(torch.exp),
    "exp2": unary(torch.exp2),
    "expm1": unary(torch.expm1),
    "log": unary(torch.log),
    "log1p": unary(torch.log1p),
    "log2": unary(torch.log2),
    "log10": unary(torch.log10),
    "sqrt": unary(torch.sqrt),
    "rsqrt": unary(torch.rsqrt),
    "reciprocal": unary(torch.reciprocal),
    "square": unary(torch.square),
    "sin": unary(torch.sin),
    "cos": unary(torch.cos),
    "tan": unary(torch.tan),
    "sinh": unary(torch.sinh),
    "cosh": unary(torch.cosh),
    "tanh": unary(torch.tanh),
    "asin": unary(torch.asin),
    "acos": unary(torch.acos),
    "atan": unary(torch.atan),
    "asinh": unary(torch.asinh),
    "acosh": unary(torch.acosh),
    "atanh": unary(torch.atanh),
    "erf": unary(torch.erf),
    "erfc": unary(torch.erfc),
    "erfinv": unary(torch.erfinv),
    "floor": unary(torch.floor),
    "ceil": unary(torch.ceil),
    "round": unary(torch.round),
    "trunc": unary(torch.trunc),
    "frac": unary(torch.frac),
    "sign": unary(torch.sign),
    "isnan": unary(torch.isnan),
    "isinf": unary(torch.isinf),
    "isposinf": unary(torch.isposinf),
    "isneginf": unary(torch.isneginf),
    "isfinite": unary(torch.isfinite),
    "logical_not": unary(torch.logical_not),
    "bitwise_not": unary(torch.bitwise_not),
    # Binary math.
    "pow.Tensor": binary(torch.pow),
    "fmod": binary(torch.fmod),
    "remainder": binary(torch.remainder),
    "atan2": binary(torch.atan2),
    "hypot": binary(torch.hypot),
    "logaddexp": binary(torch.logaddexp),
    "xlogy": binary(torch.xlogy),
    "copysign": binary(torch.copysign),
    "clamp.Tensor": lambda x, a: torch.clamp(x[0], x[1], x[2]),
    "lerp": lambda x, a: torch.lerp(x[0], x[1], x[2]),
    "logical_and": binary(torch.logical_and),
    "logical_or": binary(torch.logical_or),
    "logical_xor": binary(torch.logical_xor),
    "bitwise_and": binary(torch.bitwise_and),
    "bitwise_or": binary(torch.bitwise_or),
    "bitwise_xor": binary(torch.bitwise_xor),
    # Activations.
    "relu": unary(torch.relu),
    "relu6": unary(F.relu6),
    "sigmoid": unary(torch.sigmoid),
    "silu": unary(F.silu),
    "gelu": lambda x, a: F.gelu(x[0], approximate=GELU_APPROXIMATE[a[0]]),
    "log_sigmoid": unary(F.logsigmoid),
    "hardsigmoid": unary(F.hardsigmoid),
    "hardswish": unary(F.hardswish),
    "mish": unary(F.mish),
    "selu": unary(F.selu),
    "softplus": lambda x, a: F.softplus(x[0], beta=a[0], threshold=a[1]),
    "elu": lambda x, a: F.elu(x[0], alpha=a[0]),
    "celu": lambda x, a: F.celu(x[0], alpha=a[0]),
    "leaky_relu": lambda x, a: F.leaky_relu(x[0], negative_slope=a[0]),
    "glu": lambda x, a: F.glu(x[0], dim=a[0]),
    # The activations' gradient ops (inputs grad, self / output).
    "gelu_backward": lambda x, a: aten.gelu_backward(x[0], x[1],
                                                     approximate=GELU_APPROXIMATE[a[0]]),
    "silu_backward": binary(aten.silu_backward),
    "sigmoid_backward": binary(aten.sigmoid_backward),
    "tanh_backward": binary(aten.tanh_backward),
    # In place (on a clone of self).
    "add_": inplace("add_"),
    "sub_": inplace("sub_"),
    "mul_": inplace("mul_"),
    "div_": inplace("div_"),
    "copy_": inplace("copy_"),
    "add_.Scalar": inplace("add_", True),
    "sub_.Scalar": inplace("sub_", True),
    "mul_.Scalar": inplace("mul_", True),
    "div_.Scalar": inplace("div_", True),
    "fill_.Scalar": inplace("fill_", True),
    "zero_": inplace("zero_"),
}
SKIP = {}
# Documented in docs/SEMANTICS.md ("PyTorch parity, round 3" and "The PyTorch parity sweep").
_HARDSIGMOID = ("hardsigmoid's gradient multiplies by 1/6 in the compute type; PyTorch by the "
                "float32 1/6 even in float64 (2e-8 relative)")
_MOD = ("fmod / remainder of a huge x by a subnormal y: dtensor's std::fmod is exact, PyTorch's "
        "x - trunc(x / y) y overflows to NaN")
_ADDCDIV = ("addcdiv's gradient of tensor2 divides twice (1e300 / -1e300^2 = -1e-300); PyTorch "
            "squares tensor2 first (0)")
DELIBERATE = {
    ("hardsigmoid", "random"): _HARDSIGMOID,
    ("hardsigmoid", "edge"): _HARDSIGMOID,
    ("fmod", "edge"): _MOD,
    ("remainder", "edge"): _MOD,
    # The opt-in variants (parity_dump --variant finite / finite32).
    ("hardsigmoid", "finite"): _HARDSIGMOID,
    ("fmod", "finite"): _MOD,
    ("remainder", "finite"): _MOD,
    ("addcdiv", "finite"): _ADDCDIV,
    ("addcmul", "finite32"): ("addcmul's gradient g v t2 in float32 at t2 = 3e38: dtensor's "
                              "-3.35e38 is the rounded exact value; PyTorch's g t2 overflows "
                              "before v = 0.7 scales it (-inf)"),
}
