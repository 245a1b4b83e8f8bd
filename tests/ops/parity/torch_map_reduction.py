"""PyTorch's side of the reduction, scan and softmax families for the parity sweep
(torch_parity.py): reductions over dim lists (an empty list reduces every dim, as dtensor's
sum / mean / amax ... do), the value-and-index reductions, scans, sort / topk / kthvalue / median /
mode, the softmax family and their gradient ops. MAP[op](inputs, args)."""
import torch

aten = torch.ops.aten


def dims(x, d):
    """dtensor's dim list: empty reduces every dim."""
    return list(d) if d else list(range(x.dim()))


def over_dims(fn):
    """args (dims, keepdim)."""
    return lambda x, a: fn(x[0], dims(x[0], a[0]), keepdim=a[1])


def along(fn):
    """args (dim, keepdim)."""
    return lambda x, a: fn(x[0], a[0], keepdim=a[1])


def vjp(fn):
    """A gradient op (grad, self; dim) as the vjp of its forward at self (create_graph, so that
    its own gradients compare too)."""
    def run(x, a):
        grad, self = x[0], x[1]
        s = self if self.requires_grad else self.detach().requires_grad_()
        return torch.autograd.grad(fn(s, a[0]), s, grad, create_graph=True)[0]
    return run


def any_all(fn):
    return lambda x, a: fn(x[0], dim=tuple(dims(x[0], a[0])), keepdim=a[1])


def dim_or_all(fn):
    """argmax / argmin: args (dim or None, keepdim)."""
    return lambda x, a: fn(x[0], dim=a[0], keepdim=a[1])


MAP = {
    "sum": over_dims(torch.sum),
    "mean": over_dims(torch.mean),
    "amax": over_dims(torch.amax),
    "amin": over_dims(torch.amin),
    "logsumexp": over_dims(torch.logsumexp),
    "any": any_all(torch.any),
    "all": any_all(torch.all),
    "max": lambda x, a: torch.max(x[0]),
    "min": lambda x, a: torch.min(x[0]),
    "prod": lambda x, a: torch.prod(x[0]),
    "prod.dim_int": along(torch.prod),
    "max.dim": lambda x, a: tuple(torch.max(x[0], a[0], keepdim=a[1])),
    "min.dim": lambda x, a: tuple(torch.min(x[0], a[0], keepdim=a[1])),
    "argmax": dim_or_all(torch.argmax),
    "argmin": dim_or_all(torch.argmin),
    # args (correction, dims, keepdim)
    "var": lambda x, a: torch.var(x[0], dims(x[0], a[1]), correction=a[0], keepdim=a[2]),
    "std": lambda x, a: torch.std(x[0], dims(x[0], a[1]), correction=a[0], keepdim=a[2]),
    "var_mean": lambda x, a: torch.var_mean(x[0], dims(x[0], a[1]), correction=a[0],
                                            keepdim=a[2]),
    "std_mean": lambda x, a: torch.std_mean(x[0], dims(x[0], a[1]), correction=a[0],
                                            keepdim=a[2]),
    # args (ord, dims, keepdim)
    "vector_norm": lambda x, a: torch.linalg.vector_norm(x[0], a[0], dims(x[0], a[1]),
                                                         keepdim=a[2]),
    # (grad, indices; dim, keepdim, input shape)
    "value_selecting_backward": lambda x, a: aten.value_selecting_reduction_backward(
        x[0], a[0], x[1], a[2], a[1]),
    # Scans (dim).
    "cumsum": lambda x, a: torch.cumsum(x[0], a[0]),
    "cumprod": lambda x, a: torch.cumprod(x[0], a[0]),
    "logcumsumexp": lambda x, a: torch.logcumsumexp(x[0], a[0]),
    "cummax": lambda x, a: tuple(torch.cummax(x[0], a[0])),
    "cummin": lambda x, a: tuple(torch.cummin(x[0], a[0])),
    "cumprod_backward": vjp(lambda s, d: torch.cumprod(s, d)),
    # Selections: sort (dim, descending), argsort (dim, descending), topk (k, dim, largest),
    # kthvalue (k, dim, keepdim), median.dim / mode (dim, keepdim).
    "sort": lambda x, a: tuple(torch.sort(x[0], a[0], descending=a[1])),
    "argsort": lambda x, a: torch.argsort(x[0], a[0], descending=a[1]),
    "topk": lambda x, a: tuple(torch.topk(x[0], a[0], a[1], largest=a[2])),
    "kthvalue": lambda x, a: tuple(torch.kthvalue(x[0], a[0], a[1], keepdim=a[2])),
    "median.dim": lambda x, a: tuple(torch.median(x[0], a[0], keepdim=a[1])),
    "mode": lambda x, a: tuple(torch.mode(x[0], a[0], keepdim=a[1])),
    "median": lambda x, a: torch.median(x[0]),
    # Softmax family (dim); the gradient ops take (grad, output).
    "softmax": lambda x, a: torch.softmax(x[0], a[0]),
    "log_softmax": lambda x, a: torch.log_softmax(x[0], a[0]),
    "softmin": lambda x, a: torch.nn.functional.softmin(x[0], a[0]),
    "softmax_backward": lambda x, a: aten._softmax_backward_data(x[0], x[1], a[0], x[1].dtype),
    "log_softmax_backward": lambda x, a: aten._log_softmax_backward_data(x[0], x[1], a[0],
                                                                         x[1].dtype),
}
SKIP = {}
# Documented in docs/SEMANTICS.md ("PyTorch parity, round 3", "Scans, sorting and selection" and
# "The PyTorch parity sweep").
_MEAN = ("var_mean / std_mean's mean of data with an infinity is mean(x) (inf); PyTorch's "
         "Welford kernel gives NaN")
_PROD = ("prod / cumprod of data with an infinity or NaN next to zeros: dtensor evaluates the "
         "products of the other elements (inf * 0 = NaN); PyTorch's zero-aware formula gives 0, "
         "and its division by x NaN where an infinity meets no zero")
_TIES = ("topk / kthvalue ties go by stable sort order (0 and -0 tie); PyTorch leaves them "
         "unspecified")
_MODE = "mode with NaN: each NaN is a value of its own; PyTorch's CPU mode depends on positions"
DELIBERATE = {
    ("var_mean", "edge"): _MEAN,
    ("std_mean", "edge"): _MEAN,
    ("prod", "edge"): _PROD,
    ("cumprod", "edge"): _PROD,
    ("cumprod_backward", "edge"): _PROD,
    ("topk", "edge"): _TIES,
    ("kthvalue", "edge"): _TIES,
    ("mode", "edge"): _MODE,
    # The opt-in variants (parity_dump --variant finite / finite32). The gradient ops' inputs are free values
    # there (an output of 1e300 no log_softmax gives, a grad of 1e300): their overflows differ.
    ("kthvalue", "finite"): _TIES,
    ("cumprod_backward", "finite"): ("free inputs of 1e300: the exact sum of prefix products "
                                     "overflows to -inf, PyTorch's division gives NaN"),
    ("log_softmax_backward", "finite"): ("free inputs: an output of 1e300 (exp overflows) that "
                                         "no log_softmax gives"),
    ("kthvalue", "finite32"): _TIES,
    ("log_softmax_backward", "finite32"): ("free inputs: an output of 3e38 (exp overflows) that "
                                           "no log_softmax gives"),
}
