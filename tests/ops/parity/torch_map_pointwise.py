"""PyTorch's side of the elementwise family (tests/ops/parity/torch_parity.py): unary, binary,
scalar, activation, comparison, where / clamp, cast and in-place ops. MAP[op](inputs, args)."""
import torch

MAP = {
    "add": lambda x, a: torch.add(x[0], x[1]),
    "sub": lambda x, a: torch.sub(x[0], x[1]),
    "mul": lambda x, a: torch.mul(x[0], x[1]),
    "div": lambda x, a: torch.div(x[0], x[1]),
    "neg": lambda x, a: torch.neg(x[0]),
    "exp": lambda x, a: torch.exp(x[0]),
}
SKIP = {}
DELIBERATE = {}
