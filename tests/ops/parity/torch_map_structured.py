"""PyTorch analogues of dtensor's structured ops for the parity sweep (torch_parity.py): view,
copy, cat / stack / split, index (gather / scatter / index_add / one_hot), advanced_index,
embedding, masked_select.

MAP[op](inputs, args) takes the dumped inputs (torch tensors, in dtensor's input order) and the
decoded args (dtensor's arg order, as in the op's *_strategy.cc samples) and returns the outputs
in dtensor's output order. SKIP names the ops with no PyTorch call of their own, with the reason.
"""
import torch

F = torch.nn.functional


def _index_list(self_ndim, dims, idx):
    # dtensor's index(self, idx...; dims): idx[j] indexes dim dims[j] (the rest whole).
    out = [None] * (max(dims) + 1 if dims else 0)
    for d, t in zip(dims, idx):
        out[d % self_ndim] = t
    return out


MAP = {
    # view family
    "transpose": lambda x, a: torch.transpose(x[0], a[0], a[1]),
    "permute": lambda x, a: torch.permute(x[0], a[0]),
    "unsqueeze": lambda x, a: torch.unsqueeze(x[0], a[0]),
    "squeeze": lambda x, a: torch.squeeze(x[0], a[0]),
    "view": lambda x, a: x[0].view(a[0]),
    "reshape": lambda x, a: torch.reshape(x[0], a[0]),
    "expand": lambda x, a: x[0].expand(a[0]),
    "narrow": lambda x, a: torch.narrow(x[0], a[0], a[1], a[2]),
    # slice(dim, start, end, step)
    "slice": lambda x, a: torch.ops.aten.slice.Tensor(x[0], a[0], a[1], a[2], a[3]),
    "select": lambda x, a: torch.select(x[0], a[0], a[1]),
    "cat": lambda x, a: torch.cat(x, a[0]),
    "stack": lambda x, a: torch.stack(x, a[0]),
    "split": lambda x, a: torch.split(x[0], a[0], a[1]),
    "clone": lambda x, a: torch.clone(x[0]),
    "contiguous": lambda x, a: x[0].contiguous(),
    "flip": lambda x, a: torch.flip(x[0], a[0]),
    "roll": lambda x, a: torch.roll(x[0], a[0], a[1]),
    "repeat": lambda x, a: x[0].repeat(a[0]),
    "repeat_interleave.self_int": lambda x, a: torch.repeat_interleave(x[0], a[0], a[1]),
    "diagonal": lambda x, a: torch.diagonal(x[0], a[0], a[1], a[2]),
    "tril": lambda x, a: torch.tril(x[0], a[0]),
    "triu": lambda x, a: torch.triu(x[0], a[0]),
    # index family
    "gather": lambda x, a: torch.gather(x[0], a[0], x[1]),
    "scatter_add": lambda x, a: torch.scatter_add(x[0], a[0], x[1], x[2]),
    "scatter": lambda x, a: torch.scatter(x[0], a[0], x[1], x[2]),
    "scatter.value": lambda x, a: torch.scatter(x[0], a[1], x[1], a[0]),
    "scatter_reduce": lambda x, a: torch.scatter_reduce(x[0], a[0], x[1], x[2], a[1],
                                                        include_self=a[2]),
    # index_add(self, index, source; alpha, dim)
    "index_add": lambda x, a: torch.index_add(x[0], a[1], x[1], x[2], alpha=a[0]),
    "one_hot": lambda x, a: F.one_hot(x[0], a[0]),
    # advanced_index: index(self, idx...; dims), index_put(self, values, idx...; dims, accumulate)
    "index": lambda x, a: torch.ops.aten.index.Tensor(x[0], _index_list(x[0].dim(), a[0], x[1:])),
    "index_put": lambda x, a: torch.ops.aten.index_put.default(
        x[0], _index_list(x[0].dim(), a[0], x[2:]), x[1], a[1]),
    # embedding(weight, indices)
    "embedding": lambda x, a: F.embedding(x[1], x[0]),
    "masked_select": lambda x, a: torch.masked_select(x[0], x[1]),
    "nonzero": lambda x, a: torch.nonzero(x[0]),
}



def _vjp_of(fwd):
    """A gradient op (grad[, int inputs]; fwd's args..., input_size) as PyTorch's vjp of the
    forward op at zeros of input_size (linear in grad), kept differentiable (create_graph) so the
    op's own gradient is PyTorch's double backward. fwd(x, ints, args)."""
    def f(x, a):
        zero = torch.zeros(a[-1], dtype=x[0].dtype, requires_grad=True)
        with torch.enable_grad():
            return torch.autograd.grad(fwd(zero, x[1:], a[:-1]), zero, x[0], create_graph=True)[0]
    return f


def _move_shape_last(f, at):
    # dtensor puts input_size first (at 0) for these; _vjp_of takes it last.
    return lambda x, a: f(x, list(a[:at]) + list(a[at + 1:]) + [a[at]])


MAP.update({
    # select_backward(grad; input_sizes, dim, index) and the like
    "select_backward": _move_shape_last(
        _vjp_of(lambda z, i, a: torch.select(z, a[0], a[1])), 0),
    "slice_backward": _move_shape_last(
        _vjp_of(lambda z, i, a: torch.ops.aten.slice.Tensor(z, a[0], a[1], a[2], a[3])), 0),
    "diagonal_backward": _move_shape_last(
        _vjp_of(lambda z, i, a: torch.diagonal(z, a[0], a[1], a[2])), 0),
    # repeat_interleave_backward(grad; input_sizes, repeats, dim)
    "repeat_interleave_backward": _move_shape_last(
        _vjp_of(lambda z, i, a: torch.repeat_interleave(z, a[0], a[1])), 0),
    # gather_backward(grad, index; dim, input_shape)
    "gather_backward": _vjp_of(lambda z, i, a: torch.gather(z, a[0], i[0])),
    # masked_select_backward(grad, mask; input_shape)
    "masked_select_backward": _vjp_of(lambda z, i, a: torch.masked_select(z, i[0])),
    # embedding_backward(grad, indices; num_weights[, padding_idx]): PyTorch's embedding gives
    # the padding row no gradient
    "embedding_backward": lambda x, a: torch.ops.aten.embedding_dense_backward(
        x[0], x[1], a[0], a[1] if len(a) > 1 and a[1] is not None else -1, False),
})
SKIP = {}

# (op, variant[, sample]) -> why dtensor differs from PyTorch there (docs/SEMANTICS.md).
_EDGES = "docs/SEMANTICS.md, 'Op edge cases checked against PyTorch 2.15': "
_PROD = (_EDGES + "scatter_reduce prod passes the gradient through at a position no index names "
         "(PyTorch divides the result by self there: inf / inf = NaN)")
_TIE = ("scatter_reduce amax / amin, include_self false: an excluded self takes no share of a tie "
        "(docs/SEMANTICS.md, index ops; tests/ops/torch_grad_conventions.py)")
DELIBERATE = {("scatter_reduce", "edge", 6): _PROD, ("scatter_reduce", "edge", 7): _PROD,
              ("scatter_reduce", "edge", 19): _TIE,
              ("scatter_reduce", "edge", 20): _TIE}
