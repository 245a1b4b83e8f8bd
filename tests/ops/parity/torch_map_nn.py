"""PyTorch analogues of dtensor's nn ops for the parity sweep (torch_parity.py): matmul /
einsum, norm layers, losses, convolution, pooling, upsampling, pad, cdist and attention.

MAP[op](inputs, args) takes the dumped inputs (torch tensors, in dtensor's input order) and the
decoded args (dtensor's arg order, as in the op's *_strategy.cc samples) and returns the outputs
in dtensor's output order. dtensor-only ops (batch_norm_sums / batch_norm_affine, gather_target,
attention's log-sum-exp output) are written with the PyTorch ops they are documented to equal.
SKIP names the ops with no PyTorch call of their own, with the reason.
"""
import warnings

import torch

F = torch.nn.functional
aten = torch.ops.aten


def _quiet(fn, *args, **kwargs):
    # kl_div's 'mean' warns that it is not the KL divergence; the sweep maps it as asked.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _opt(v):
    # dtensor passes 0 for an unset scale / divisor_override (PyTorch: None).
    return None if v in (0, 0.0) else v


def _bn_dims(x):
    return [d for d in range(x.dim()) if d != 1]


def _bn_sums(x, a):
    # batch_norm_sums: [2, C] float64 sums of x and x^2 over every dim but 1 (norm.h).
    x64 = x[0].to(torch.float64)
    d = _bn_dims(x64)
    return torch.stack([x64.sum(d), (x64 * x64).sum(d)])


def _bn_affine(x, a):
    # batch_norm_affine: x * factors[0][k] + factors[1][k] in the factors' dtype (float64 for a
    # float64 x, float32 otherwise), y in x's dtype (norm.h).
    inp, f = x
    ct = torch.float64 if inp.dtype == torch.float64 else torch.float32
    shape = [1, -1] + [1] * (inp.dim() - 2)
    f = f.to(ct)
    return (inp.to(ct) * f[0].reshape(shape) + f[1].reshape(shape)).to(inp.dtype)


def _layer_norm(x, a):
    # layer_norm(input[, weight][, bias]; eps, normalized_shape, has_weight, has_bias)
    eps, shape, hw, hb = a
    w = x[1] if hw else None
    b = x[1 + hw] if hb else None
    return F.layer_norm(x[0], shape, w, b, eps)


def _rms_norm(x, a):
    eps, shape, hw = a
    return F.rms_norm(x[0], shape, x[1] if hw else None, eps)


def _group_norm(x, a):
    eps, groups, hw, hb = a
    w = x[1] if hw else None
    b = x[1 + hw] if hb else None
    return F.group_norm(x[0], groups, w, b, eps)


class _SplitGrad(torch.autograd.Function):
    """real(xs)'s value, and its gradients but for the inputs in `split`, whose gradients are
    comp(xs)'s: PyTorch refuses a gradient for a loss's class / element weights (SEMANTICS,
    losses, Gradients: dtensor gives them one); comp writes the same loss with the weights as
    plain factors, so its weight gradient is the derivative of PyTorch's formula."""

    @staticmethod
    def forward(ctx, real, comp, split, *xs):
        ctx.fns = (real, comp, split)
        ctx.save_for_backward(*xs)
        with torch.no_grad():
            return real(list(xs))

    @staticmethod
    def backward(ctx, g):
        real, comp, split = ctx.fns
        xs = [x.detach().requires_grad_(x.is_floating_point()) for x in ctx.saved_tensors]
        grads = [None] * len(xs)
        with torch.enable_grad():
            for fn, mine in ((real, lambda i: i not in split), (comp, lambda i: i in split)):
                use = [x if mine(i) else x.detach() for i, x in enumerate(xs)]
                want = [i for i, x in enumerate(xs) if mine(i) and x.is_floating_point()]
                if not want:
                    continue
                got = torch.autograd.grad(fn(use), [use[i] for i in want], g, allow_unused=True)
                for i, t in zip(want, got):
                    grads[i] = t
        return (None, None, None, *grads)


def _split_grad(real, comp, split, x):
    return _SplitGrad.apply(real, comp, frozenset(split), *x)


def _reduce(loss, red):
    return {"none": lambda t: t, "mean": torch.mean, "sum": torch.sum}[red](loss)


def _bce(x, a):
    # binary_cross_entropy(input, target[, weight]; reduction, has_weight)
    red, hw = a
    real = lambda v: F.binary_cross_entropy(v[0], v[1], v[2] if hw else None, reduction=red)
    if not hw:
        return real(x)
    comp = lambda v: _reduce(F.binary_cross_entropy(v[0], v[1], reduction="none") * v[2], red)
    return _split_grad(real, comp, [2], x)


def _bce_logits(x, a):
    # (input, target[, weight][, pos_weight]; reduction, has_weight, has_pos_weight)
    red, hw, hp = a

    def real(v):
        w = v[2] if hw else None
        p = v[2 + hw] if hp else None
        return F.binary_cross_entropy_with_logits(v[0], v[1], w, reduction=red, pos_weight=p)

    if not hw and not hp:
        return real(x)

    def comp(v):
        t = v[1]
        p = v[2 + hw] if hp else 1.0
        loss = -(p * t * F.logsigmoid(v[0])) - (1 - t) * F.logsigmoid(-v[0])
        return _reduce(loss * v[2] if hw else loss, red)

    return _split_grad(real, comp, [i for i in range(2, len(x))], x)


def _nll_parts(v, ii, hw):
    # The picked input entries and their weights w[t] (0 where the target is ignored).
    inp, t = v[0], v[1]
    keep = t != ii
    tt = t.masked_fill(~keep, 0)
    cd = 1 if inp.dim() > 1 else 0
    pick = inp.gather(cd, tt.unsqueeze(cd)).squeeze(cd)
    wt = (v[2][tt] if hw else torch.ones_like(pick)) * keep
    return pick, wt


def _nll(x, a):
    # nll_loss(input, target[, weight]; reduction, ignore_index, has_weight) -> (loss,
    # total_weight), as aten.nll_loss_forward: total_weight the sum of w[t] over the counted
    # targets (0 for 'none').
    red, ii, hw = a
    real = lambda v: F.nll_loss(v[0], v[1], v[2] if hw else None, ignore_index=ii, reduction=red)

    def comp(v):
        pick, wt = _nll_parts(v, ii, hw)
        loss = -wt * pick
        return loss.sum() / wt.sum() if red == "mean" else _reduce(loss, red)

    loss = _split_grad(real, comp, [2], x) if hw else real(x)
    # aten's total_weight: W for 'sum' and 'mean' (dtensor: for 'mean' only, DELIBERATE below),
    # 0 for 'none', w[t] for a 1-d input whatever the reduction.
    wt = _nll_parts(x, ii, hw)[1]
    total = wt.sum() if red != "none" or x[0].dim() == 1 else x[0].new_zeros(())
    return loss, total


def _sdpa(x, a):
    # scaled_dot_product_attention(q, k, v[, mask]; scale, is_causal, lower_right) -> (out, lse):
    # lse the log-sum-exp of each row of the masked scores (attention.h).
    q, k, v = x[:3]
    mask = x[3] if len(x) > 3 else None
    scale, causal, lower_right = a
    L, S = q.shape[-2], k.shape[-2]
    if causal:
        keep = torch.ones(L, S, dtype=torch.bool).tril(S - L if lower_right else 0)
        if mask is None:
            mask = keep
        elif mask.dtype == torch.bool:
            mask = mask & keep
        else:
            mask = mask.masked_fill(~keep, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    s = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    # A row that sees no key: lse -inf with gradient 0 (SEMANTICS, attention; logsumexp's own
    # gradient there is exp(-inf - -inf) = NaN).
    dead = (s == float("-inf")).all(-1, keepdim=True)
    lse = torch.logsumexp(s.masked_fill(dead, 0.0), -1).masked_fill(dead.squeeze(-1),
                                                                    float("-inf"))
    # A row holding a +inf score: NaN, as PyTorch's CPU flash kernel's logsumexp output
    # (aten._scaled_dot_product_flash_attention_for_cpu; torch.logsumexp gives inf).
    lse = lse.masked_fill((s == float("inf")).any(-1), float("nan"))
    return out, lse


def _pool_max(nd):
    def f(x, a):
        k, s, p, d, ceil = a
        fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
        return fn(x[0], k, s, p, d, ceil_mode=ceil, return_indices=True)
    return f


def _pool_avg(nd):
    def f(x, a):
        k, s, p, ceil, cip, div = a
        if nd == 1:
            return F.avg_pool1d(x[0], k, s, p, ceil, cip)
        fn = {2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
        return fn(x[0], k, s, p, ceil, cip, _opt(div))
    return f


def _up(name, align):
    op = getattr(aten, name)
    if align:
        return lambda x, a: op(x[0], a[0], a[1], *[_opt(v) for v in a[2:]])
    return lambda x, a: op(x[0], a[0], *[_opt(v) for v in a[1:]])


def _pad(x, a):
    pad, mode, value = a
    if mode == "constant":
        return F.pad(x[0], pad, mode, value)
    return F.pad(x[0], pad, mode)


def _vjp(fwd, xs, g, wrt=(0,)):
    """The gradient op as PyTorch's own: the vjp of fwd at xs with cotangent(s) g, kept
    differentiable (create_graph) so the op's own gradient is PyTorch's double backward."""
    xs = [x if (i not in wrt or x.requires_grad) else x.detach().requires_grad_()
          for i, x in enumerate(xs)]
    with torch.enable_grad():
        out = fwd(xs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        gs = list(g) if isinstance(g, (tuple, list)) else [g]
        return torch.autograd.grad(outs, [xs[i] for i in wrt], gs, create_graph=True)


def _linear_bw(fwd, n_tail=1):
    # gradient op (grad; fwd's args..., input_size): linear in grad.
    def f(x, a):
        zero = torch.zeros(a[-1], dtype=x[0].dtype)
        return _vjp(lambda v: fwd([v[0]], a[:-1]), [zero], x[0])[0]
    return f


def _max_pool_bw(x, a):
    # max_pool_backward(grad, indices; input_shape, nd): grad added at each window's argmax.
    g, idx = x
    shape, nd = a
    lead = list(shape[:-nd])
    n = 1
    for d in shape[-nd:]:
        n *= d
    out = torch.zeros(lead + [n], dtype=g.dtype)
    out = out.scatter_add(-1, idx.reshape(lead + [-1]), g.reshape(lead + [-1]))
    return out.reshape(shape)


MAP = {
    # matmul family
    "mm": lambda x, a: torch.mm(x[0], x[1]),
    "bmm": lambda x, a: torch.bmm(x[0], x[1]),
    "matmul": lambda x, a: torch.matmul(x[0], x[1]),
    "dot": lambda x, a: torch.dot(x[0], x[1]),
    "outer": lambda x, a: torch.outer(x[0], x[1]),
    "addmm": lambda x, a: torch.addmm(x[0], x[1], x[2], beta=a[0], alpha=a[1]),
    "baddbmm": lambda x, a: torch.baddbmm(x[0], x[1], x[2], beta=a[0], alpha=a[1]),
    "linear": lambda x, a: F.linear(x[0], x[1]),
    "linear.bias": lambda x, a: F.linear(x[0], x[1], x[2]),
    "einsum": lambda x, a: torch.einsum(a[0], *x),
    # norm family
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "group_norm": _group_norm,
    "batch_norm_sums": _bn_sums,
    "batch_norm_affine": _bn_affine,
    # losses; gather_target(input, target; ignore_index) = input[i, target[i]], 0 where ignored
    "gather_target": lambda x, a: -F.nll_loss(x[0], x[1], ignore_index=a[0], reduction="none"),
    "mse_loss": lambda x, a: F.mse_loss(x[0], x[1], reduction=a[0]),
    "l1_loss": lambda x, a: F.l1_loss(x[0], x[1], reduction=a[0]),
    "smooth_l1_loss": lambda x, a: F.smooth_l1_loss(x[0], x[1], reduction=a[0], beta=a[1]),
    "huber_loss": lambda x, a: F.huber_loss(x[0], x[1], reduction=a[0], delta=a[1]),
    "binary_cross_entropy": _bce,
    "binary_cross_entropy_with_logits": _bce_logits,
    "kl_div": lambda x, a: _quiet(F.kl_div, x[0], x[1], reduction=a[0], log_target=a[1]),
    "nll_loss": _nll,
    # attention, distance, convolution
    "scaled_dot_product_attention": _sdpa,
    "scaled_dot_product_attention.mask": _sdpa,
    "cdist": lambda x, a: torch.cdist(x[0], x[1], a[0]),
    # convolution(input, weight; stride, padding, dilation, transposed, output_padding, groups)
    "convolution": lambda x, a: aten.convolution(x[0], x[1], None, *a),
    # pooling, upsampling, pad
    "max_pool1d_with_indices": _pool_max(1),
    "max_pool2d_with_indices": _pool_max(2),
    "max_pool3d_with_indices": _pool_max(3),
    "avg_pool1d": _pool_avg(1),
    "avg_pool2d": _pool_avg(2),
    "avg_pool3d": _pool_avg(3),
    "adaptive_avg_pool1d": lambda x, a: F.adaptive_avg_pool1d(x[0], a[0]),
    "adaptive_avg_pool2d": lambda x, a: F.adaptive_avg_pool2d(x[0], a[0]),
    "adaptive_max_pool2d": lambda x, a: F.adaptive_max_pool2d(x[0], a[0], return_indices=True),
    "upsample_nearest1d": _up("upsample_nearest1d", False),
    "upsample_nearest2d": _up("upsample_nearest2d", False),
    "upsample_nearest3d": _up("upsample_nearest3d", False),
    "_upsample_nearest_exact1d": _up("_upsample_nearest_exact1d", False),
    "_upsample_nearest_exact2d": _up("_upsample_nearest_exact2d", False),
    "_upsample_nearest_exact3d": _up("_upsample_nearest_exact3d", False),
    "upsample_linear1d": _up("upsample_linear1d", True),
    "upsample_bilinear2d": _up("upsample_bilinear2d", True),
    "upsample_bicubic2d": _up("upsample_bicubic2d", True),
    "upsample_trilinear3d": _up("upsample_trilinear3d", True),
    "pad": _pad,
    # gradient ops linear in the gradient: PyTorch's vjp of the forward op (and, through
    # create_graph, its double backward)
    "max_pool_backward": _max_pool_bw,
    "pad_backward": _linear_bw(_pad),
    "gather_target_backward": lambda x, a: _vjp(
        lambda v: MAP["gather_target"]([v[0], x[1]], [a[1]]),
        [torch.zeros(a[0], dtype=x[0].dtype)], x[0])[0],
    "batch_norm_sums_backward": lambda x, a: _vjp(lambda v: _bn_sums([v[0]], []), [x[1]], x[0])[0],
    "batch_norm_affine_backward": lambda x, a: _vjp(lambda v: _bn_affine(v, []), [x[1], x[2]],
                                                    x[0], (0, 1)),
}
for _name in ["avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
              "adaptive_avg_pool2d", "upsample_nearest1d", "upsample_nearest2d",
              "upsample_nearest3d", "_upsample_nearest_exact1d", "_upsample_nearest_exact2d",
              "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
              "upsample_bicubic2d", "upsample_trilinear3d"]:
    MAP[_name + "_backward"] = _linear_bw(MAP[_name])



def _norm_bw(fwd, n_affine):
    # <norm>_backward(grad, input[, weight]; the forward's args): (grad_input[, grad_weight]
    # [, grad_bias]) as PyTorch's vjp of the forward op (a bias's value does not matter).
    def f(x, a):
        flags = list(a[-n_affine:])
        shape = x[1].shape[x[1].dim() - len(a[1]):] if isinstance(a[1], list) else [x[1].shape[1]]
        xs = [x[1]] + ([x[2]] if flags[0] else [])
        if n_affine > 1 and flags[1]:
            xs.append(torch.zeros(shape, dtype=x[1].dtype))
        return _vjp(lambda v: fwd(v, a), xs, x[0], tuple(range(len(xs))))
    return f


def _loss_bw(name):
    # <loss>_backward(grad, input, target[, weight][, pos_weight]; wrt, the forward's args): the
    # gradient with respect to input (wrt 0) or target (1), or the per-element gradient of the
    # weight (2) or pos_weight (3) at the input's shape (before the sum over its broadcast
    # dims): PyTorch's vjp, with that weight expanded to the input's shape.
    def f(x, a):
        wrt, args = a[0], a[1:]
        xs = list(x[1:])
        i = wrt
        if wrt >= 2:
            i = 2 if wrt == 2 else 2 + bool(args[1])  # args: reduction, has_weight, ...
            xs[i] = xs[i].expand(xs[0].shape).clone()
        return _vjp(lambda v: MAP[name](v, args), xs, x[0], (i,))[0]
    return f


def _nll_bw(x, a):
    # nll_loss_backward(grad, target, total_weight[, weight]; input_shape, reduction,
    # ignore_index, has_weight): aten's, -weight[t] * grad (/ total_weight for the mean) at
    # [i, t_i], from the given total_weight.
    g, t, total = x[0], x[1], x[2]
    shape, red, ii, hw = a
    keep = t != ii
    tt = t.masked_fill(~keep, 0)
    w = x[3][tt] if hw else torch.ones(t.shape, dtype=g.dtype)
    gi = -(w * keep) * g
    if red == "mean":
        gi = gi / total
    cd = 1 if len(shape) > 1 else 0
    return torch.zeros(shape, dtype=g.dtype).scatter(cd, tt.unsqueeze(cd), gi.unsqueeze(cd))


def _conv_bw(x, a):
    # convolution_backward(grad, input, weight; the forward's args, input_mask, weight_mask):
    # the requested gradients, aten's.
    *fwd, m_in, m_w = a
    gi, gw, _ = aten.convolution_backward(x[0], x[1], x[2], None, *fwd, [m_in, m_w, False])
    return [t for t, m in ((gi, m_in), (gw, m_w)) if m]


MAP.update({
    "layer_norm_backward": _norm_bw(_layer_norm, 2),
    "rms_norm_backward": _norm_bw(_rms_norm, 1),
    "group_norm_backward": _norm_bw(_group_norm, 2),
    "nll_loss_backward": _nll_bw,
    # cdist_backward(grad, x1, x2, dist; p): aten._cdist_backward, from the given dist
    "cdist_backward": lambda x, a: aten._cdist_backward(x[0], x[1], x[2], a[0], x[3]),
    "convolution_backward": _conv_bw,
})
for _name in ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
              "binary_cross_entropy_with_logits", "kl_div"]:
    MAP[_name + "_backward"] = _loss_bw(_name)

_GRAD_OP = "gradient op: checked through its forward op's gradient in this sweep"
SKIP = {"scaled_dot_product_attention_backward": _GRAD_OP + " (scaled_dot_product_attention; "
        "its out and lse inputs are free values here, which no PyTorch call takes with lse's "
        "gradient)"}
SKIP["scaled_dot_product_attention_backward.mask"] = _GRAD_OP + " (scaled_dot_product_attention.mask)"

# (op, variant[, sample]) -> why dtensor differs from PyTorch there (docs/SEMANTICS.md).
_NLL_TOTAL = ("nll_loss's second output total_weight (the registered op's, as aten's "
              "nll_loss_forward; F.nll_loss returns the loss only) is W for 'mean' only: 0 for "
              "'sum' (aten: W) and for a 1-d input's 'none' (aten: w[t]); SEMANTICS, Losses")
DELIBERATE = {("nll_loss", v, s): _NLL_TOTAL for v in ("random", "edge", "float32")
              for s in (2, 3)}
_EDGES = "docs/SEMANTICS.md, 'Op edge cases checked against PyTorch 2.15': "
DELIBERATE.update({
    ("cdist", "edge", 2): _EDGES + "cdist p inf propagates a NaN component (PyTorch's max skips "
                          "it) and gives an inf distance's largest components their sign as "
                          "gradient (PyTorch: NaN, from inf - inf)",
    ("cdist", "edge", 3): _EDGES + "cdist p inf: inf - inf is a NaN component, propagated "
                          "(PyTorch's max skips it and gives 0)",
    ("group_norm", "edge", 2): _EDGES + "group_norm's input gradient in a group whose weight is "
                               "inf is undefined: inf or NaN by element here, NaN in PyTorch",
})
DELIBERATE[("group_norm_backward", "edge", 2)] = DELIBERATE[("group_norm", "edge", 2)]
for _s in (0, 3):
    DELIBERATE[("cdist_backward", "edge", _s)] = (
        _EDGES + "cdist_backward on free inf / NaN inputs skips a pair whose upstream gradient "
        "or distance is 0 (PyTorch multiplies: 0 * NaN), and divides by the given distance")
for _s in (0, 1, 2):
    DELIBERATE[("binary_cross_entropy_backward", "edge", _s)] = (
        _EDGES + "binary_cross_entropy_backward does not check the target's range again (its "
        "forward does, as PyTorch's; PyTorch's vjp here reruns the forward)")
# Every edge sample: a linear or bicubic output (or, transposed, its backward's input element)
# with an interpolation weight of exactly 0 reads nothing there (an inf or NaN next to it or
# under it stays out); PyTorch's kernel multiplies 0 by the element (NaN at an inf one).
for _op in ("upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d",
            "upsample_linear1d_backward", "upsample_bilinear2d_backward",
            "upsample_trilinear3d_backward", "upsample_bicubic2d_backward"):
    DELIBERATE[(_op, "edge")] = (
        _EDGES + "upsample linear / bicubic modes skip an interpolation weight of exactly 0 (a "
        "dim whose size does not change, outputs clamped to the edge, align_corners' whole "
        "sources): an identity resize returns its input, inf included; PyTorch multiplies the "
        "element by 0 (NaN at an inf element or next to it, and in the backward at an inf "
        "upstream gradient)")
