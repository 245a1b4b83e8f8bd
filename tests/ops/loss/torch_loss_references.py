"""PyTorch reference values and gradients of the losses tested in tests/ops/loss/test_loss.cc
("... match PyTorch 2.15 ..."): mse_loss, l1_loss, smooth_l1_loss, huber_loss,
binary_cross_entropy (weighted), binary_cross_entropy_with_logits (weight, pos_weight), kl_div
(log_target both ways, 'batchmean') and nll_loss (class weights, an ignored target), float64, for
every reduction; the inputs include the kinks (x == y for l1, |x - y| == beta == delta), bce's
clamped logarithms at 0 and 1, kl_div's target 0 and a large logit.

Run from outside the repository (the values committed are from torch 2.15.0+cu132, CPU):
  cd /tmp && /root/venv/bin/python /work/main/tests/ops/loss/torch_loss_references.py
It prints the C++ table test_loss.cc holds (kTorchRefs). For 'none' the gradients are of
sum(upstream * loss) with upstream = kUpstream; for the reductions, of the loss itself.
"""
import os
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
torch.set_default_dtype(torch.float64)
F = torch.nn.functional
# --margin prints only the round-9 table (at the end): the first one goes nowhere.
if "--margin" in sys.argv:
    sys.stdout = open(os.devnull, "w")

UPSTREAM = [0.5, -1.0, 2.0, 1.0, -0.5, 1.5]
REG_X = [-1.5, 0.25, 2.0, -0.75, 1.0, 3.5]
REG_Y = [0.5, 0.25, -1.0, 0.5, 0.0, 0.0]
BCE_X = [0.1, 0.5, 0.9, 1e-30, 1.0, 0.3]
BCE_Y = [0.0, 1.0, 0.5, 1.0, 0.0, 0.7]
BCE_W = [0.5, 1.0, 2.0]  # [3]: broadcast over the rows of [2, 3]
LOGIT_X = [-3.0, -0.5, 0.0, 0.5, 2.0, 40.0]
LOGIT_Y = [0.0, 1.0, 0.5, 0.2, 1.0, 0.0]
LOGIT_W = [[1.5], [0.5]]  # [2, 1]
LOGIT_PW = [2.0, 0.5, 1.5]  # [3]
KL_X = [-1.2, -0.3, -2.0, -0.1, -3.0, -0.7]
KL_Y = [0.2, 0.0, 0.5, 1.0, 0.3, 0.05]
KL_LOG_Y = [-1.6, -0.2, -2.3, -0.05, -1.0, -4.0]
NLL_X = [[-1.2, -0.4, -2.1], [-0.3, -1.9, -1.4], [-2.2, -0.2, -1.0], [-0.7, -1.1, -1.6]]
NLL_T = [0, 2, -100, 1]
NLL_W = [0.2, 1.0, 3.0]


def fmt(values):
    return "{" + ", ".join(repr(float(v)) if v == v and abs(v) != float("inf") else
                           ("kNaN" if v != v else ("kInf" if v > 0 else "-kInf"))
                           for v in values) + "}"


def case(name, reduction, f, x, y, grad_target=True):
    xs = torch.tensor(x, requires_grad=True)
    ys = torch.tensor(y, requires_grad=grad_target)
    out = f(xs.reshape(2, 3) if xs.dim() == 1 else xs, ys.reshape(2, 3) if ys.dim() == 1 else ys)
    if reduction == "none":
        out.backward(torch.tensor(UPSTREAM).reshape(out.shape))
    else:
        out.backward()
    gy = ys.grad.flatten().tolist() if grad_target else []
    print(f'    {{"{name}", "{reduction}", {fmt(out.detach().flatten().tolist())}, '
          f'{fmt(xs.grad.flatten().tolist())}, {fmt(gy)}}},')


print("// torch", torch.__version__)
for r in ("none", "sum", "mean"):
    case("mse_loss", r, lambda x, y: F.mse_loss(x, y, reduction=r), REG_X, REG_Y)
    case("l1_loss", r, lambda x, y: F.l1_loss(x, y, reduction=r), REG_X, REG_Y)
    case("smooth_l1_loss", r, lambda x, y: F.smooth_l1_loss(x, y, reduction=r, beta=1.0),
         REG_X, REG_Y)
    case("smooth_l1_loss(beta=0)", r,
         lambda x, y: F.smooth_l1_loss(x, y, reduction=r, beta=0.0), REG_X, REG_Y)
    case("huber_loss", r, lambda x, y: F.huber_loss(x, y, reduction=r, delta=1.0), REG_X, REG_Y)
    case("huber_loss(delta=2.5)", r, lambda x, y: F.huber_loss(x, y, reduction=r, delta=2.5),
         REG_X, REG_Y)
    case("binary_cross_entropy", r, lambda x, y: F.binary_cross_entropy(x, y, reduction=r),
         BCE_X, BCE_Y)
    case("binary_cross_entropy(weight)", r,
         lambda x, y: F.binary_cross_entropy(x, y, weight=torch.tensor(BCE_W), reduction=r),
         BCE_X, BCE_Y)
    case("binary_cross_entropy_with_logits", r,
         lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction=r), LOGIT_X, LOGIT_Y)
    case("binary_cross_entropy_with_logits(weight, pos_weight)", r,
         lambda x, y: F.binary_cross_entropy_with_logits(
             x, y, weight=torch.tensor(LOGIT_W), pos_weight=torch.tensor(LOGIT_PW), reduction=r),
         LOGIT_X, LOGIT_Y)
for r in ("none", "sum", "mean", "batchmean"):
    case("kl_div", r, lambda x, y: F.kl_div(x, y, reduction=r), KL_X, KL_Y)
    case("kl_div(log_target)", r, lambda x, y: F.kl_div(x, y, reduction=r, log_target=True),
         KL_X, KL_LOG_Y)
# nll_loss: the "target" is the class index (no gradient); input [4, 3], upstream [4].
for r in ("none", "sum", "mean"):
    xs = torch.tensor(NLL_X, requires_grad=True)
    out = F.nll_loss(xs, torch.tensor(NLL_T), weight=torch.tensor(NLL_W), reduction=r)
    if r == "none":
        out.backward(torch.tensor(UPSTREAM[:4]))
    else:
        out.backward()
    print(f'    {{"nll_loss(weight)", "{r}", {fmt(out.detach().flatten().tolist())}, '
          f'{fmt(xs.grad.flatten().tolist())}, {{}}}},')

# cross_entropy with class weights (class-index targets, label smoothing, an ignored target; [4, 3]
# and [2, 3, 2]) and with class-probability targets (weights and smoothing; a [2, 3, 2] input).
# The class-index rows have no target gradient; the probability rows do.
CE_X = [[1.2, -0.4, 0.3], [-0.8, 2.1, 0.5], [0.0, 0.7, -1.5], [1.6, -0.2, 0.9]]
CE_T = [0, 2, -100, 1]
CE_W = [0.2, 1.0, 3.0]
CE_P = [[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.25, 0.25, 0.5], [0.0, 1.0, 0.0]]
CE_X3 = [[[0.5, -1.0], [1.5, 0.2], [-0.3, 0.8]], [[2.0, 0.1], [-0.6, -1.2], [0.4, 1.1]]]
CE_T3 = [[1, -100], [2, 0]]
CE_P3 = [[[0.2, 0.5], [0.3, 0.5], [0.5, 0.0]], [[1.0, 0.1], [0.0, 0.6], [0.0, 0.3]]]
CE_CASES = [
    ("cross_entropy(weight)", CE_X, CE_T, CE_W, 0.0),
    ("cross_entropy(weight, smoothing=0.2)", CE_X, CE_T, CE_W, 0.2),
    ("cross_entropy(weight, smoothing=0.1, [2, 3, 2])", CE_X3, CE_T3, CE_W, 0.1),
    ("cross_entropy(probs, weight, smoothing=0.2)", CE_X, CE_P, CE_W, 0.2),
    ("cross_entropy(probs, [2, 3, 2])", CE_X3, CE_P3, None, 0.0),
]
for name, x, y, w, s in CE_CASES:
    for r in ("none", "sum", "mean"):
        xs = torch.tensor(x, requires_grad=True)
        probs = "probs" in name
        ys = torch.tensor(y, requires_grad=True) if probs else torch.tensor(y)
        out = F.cross_entropy(xs, ys, weight=None if w is None else torch.tensor(w), reduction=r,
                              label_smoothing=s)
        if r == "none":
            out.backward(torch.tensor(UPSTREAM[:out.numel()]).reshape(out.shape))
        else:
            out.backward()
        gy = fmt(ys.grad.flatten().tolist()) if probs else "{}"
        print(f'    {{"{name}", "{r}", {fmt(out.detach().flatten().tolist())}, '
              f'{fmt(xs.grad.flatten().tolist())}, {gy}}},')

# The weights' gradient of cross_entropy with probability targets (PyTorch has one there, a
# product of differentiable ops; it refuses one with class indices): test_loss.cc's
# "cross_entropy conventions" case.
for r in ("sum", "mean"):
    ws = torch.tensor(CE_W, requires_grad=True)
    F.cross_entropy(torch.tensor(CE_X), torch.tensor(CE_P), weight=ws, reduction=r,
                    label_smoothing=0.2).backward()
    print(f"// cross_entropy(probs, weight, smoothing=0.2) {r}: weight grad "
          f"{fmt(ws.grad.tolist())}")

# ---- Round 9: the margin, embedding and likelihood losses (tests/ops/loss/torch_margin_loss_refs.h,
# compared by test_loss.cc's "margin, embedding and likelihood losses match PyTorch 2.15").
# Each row holds the inputs too: {name, reduction, {{data, shape, integer}...}, value, {grad of
# each input}} (an empty gradient: the input is an integer or PyTorch gives it none). Run with
# --margin to print only this table (the header's body).

def arg(data, dtype=torch.float64):
    return torch.tensor(data, dtype=dtype)


def margin_case(name, reduction, f, args, grads):
    ts = [a.clone().requires_grad_(g) for a, g in zip(args, grads)]
    out = f(*ts)
    if reduction == "none":
        out.backward(torch.tensor(UPSTREAM[:out.numel()]).reshape(out.shape))
    else:
        out.backward()

    def show(a):
        shape = "{" + ", ".join(str(s) for s in a.shape) + "}"
        integer = "true" if not a.is_floating_point() else "false"
        return "{" + fmt(a.flatten().tolist()) + ", " + shape + ", " + integer + "}"

    gs = ", ".join(fmt(t.grad.flatten().tolist()) if g and t.grad is not None else "{}"
                   for t, g in zip(ts, grads))
    print(f'    {{"{name}", "{reduction}", {{{", ".join(show(a) for a in args)}}}, '
          f'{fmt(out.detach().flatten().tolist())}, {{{gs}}}}},')


MR_X1 = arg([1.0, -0.5, 2.0, 0.3, 0.0, 1.5])
MR_X2 = arg([0.5, 0.5, 2.0, 0.8, -1.0, 1.5])
MR_T = arg([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])  # margin 0.5: a tie at element 0
HE_X = arg([[-1.5, 0.25, 2.0], [1.0, 1.0, 3.5]])
HE_T = arg([[1.0, -1.0, -1.0], [-1.0, 0.0, 1.0]])  # a target 0 gets both terms; x == margin
CE_A = arg([[1.0, 2.0, -0.5, 0.3], [0.2, -1.0, 0.4, 1.1], [0.0, 0.0, 0.0, 0.0]])
CE_B = arg([[0.5, 1.5, 0.5, -0.2], [-0.3, 1.2, 0.4, -0.8], [1.0, -1.0, 0.5, 0.2]])
CE_TT = arg([1.0, -1.0, -1.0])
SM_X = arg([[-1.5, 0.25, 2.0], [-0.75, 1.0, 30.0]])
SM_T = arg([[1.0, -1.0, 1.0], [1.0, -1.0, -1.0]])
# The tail: -x * t == -40 or -38 gives a loss near 4e-18 (log1p(exp(.)), not log(exp(.) + 1) == 0);
# test_loss.cc compares this row's values with a relative tolerance.
SM_TAIL_X = arg([40.0, -38.0, -40.0])
SM_TAIL_T = arg([1.0, -1.0, 1.0])
MS_T = arg([[1.0, 0.0, 0.5], [0.0, 1.0, 1.0]])
MS_W = arg([0.5, 1.0, 2.0])
MM_X = arg([[0.5, 1.5, 0.5], [2.0, -1.0, 0.3], [0.1, 0.2, 0.3], [-0.4, 0.9, 0.2]])
MM_T = arg([1, 0, 2, 1], torch.int64)  # row 0: margin 1 - 1.5 + 0.5 == 0, a tie
MM_W = arg([0.2, 1.0, 3.0])
ML_X = arg([[0.1, 0.2, 0.4, 0.8], [0.5, -0.5, 1.5, 0.0], [0.3, 0.3, 1.3, -0.2]])
ML_T = arg([[3, 0, -1, 1], [1, 1, 2, -1], [2, -1, 1, 0]], torch.int64)  # 1 listed twice; ties
TR_A = arg([[1.0, 2.0, -0.5], [0.2, -1.0, 0.4], [0.5, 0.5, 0.5], [1.0, 0.0, -1.0],
            [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
TR_P = arg([[0.5, 1.5, 0.5], [0.2, -1.0, 0.4], [0.0, 1.0, 0.5], [1.2, 0.1, -0.9],
            [1.0, 0.0, 0.0], [-1.0, 1.0, 0.0]])
# Row 1: p == a; row 4: swapping matters (d(p, n) < d(a, n)); row 5: d(p, n) == d(a, n)
# exactly (p - n a permutation of a - n), a tie of the swap's minimum with a positive loss.
TR_N = arg([[1.0, 2.5, -0.5], [1.0, 1.0, 1.0], [0.4, 0.6, 0.5], [3.0, 2.0, 1.0],
            [1.5, 0.0, 0.0], [1.0, 2.0, 0.0]])
PO_X = arg([[-1.0, 0.5, 2.0], [0.0, 1.5, -0.3]])
PO_XP = arg([[0.2, 1.5, 3.0], [1e-9, 0.7, 4.0]])
PO_T = arg([[0.0, 1.0, 2.5], [4.0, 0.5, 7.0]])
GA_X = arg([[0.5, -1.0, 2.0], [1.5, 0.0, -0.3]])
GA_T = arg([[1.0, -1.0, 0.5], [0.0, 2.0, -0.1]])
GA_V = arg([[0.5, 0.0, 2.0], [1e-8, 1.5, 0.3]])  # 0 and 1e-8 are clamped to eps
GA_V1 = arg([0.7, 1e-9])
GA_V21 = arg([[0.7], [2.0]])
GA_V13 = arg([[0.7, 0.2, 1.5]])


def margin_cases():
    print("// torch", torch.__version__)
    for r in ("none", "sum", "mean"):
        for m in (0.0, 0.5):
            margin_case(f"margin_ranking_loss(margin={m})", r,
                        lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=m, reduction=r),
                        [MR_X1, MR_X2, MR_T], [True, True, True])
        for m in (1.0, 2.0):
            margin_case(f"hinge_embedding_loss(margin={m})", r,
                        lambda x, t: F.hinge_embedding_loss(x, t, margin=m, reduction=r),
                        [HE_X, HE_T], [True, False])
        for m in (0.0, 0.3):
            margin_case(f"cosine_embedding_loss(margin={m})", r,
                        lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=m, reduction=r),
                        [CE_A, CE_B, CE_TT], [True, True, False])
        margin_case("cosine_embedding_loss(1-d)", r,
                    lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=0.2, reduction=r),
                    [CE_A[0], CE_B[0], arg(-1.0)], [True, True, False])
        margin_case("soft_margin_loss", r, lambda x, t: F.soft_margin_loss(x, t, reduction=r),
                    [SM_X, SM_T], [True, False])
        margin_case("soft_margin_loss(tail)", r,
                    lambda x, t: F.soft_margin_loss(x, t, reduction=r),
                    [SM_TAIL_X, SM_TAIL_T], [True, False])
        margin_case("multilabel_soft_margin_loss", r,
                    lambda x, t: F.multilabel_soft_margin_loss(x, t, reduction=r),
                    [SM_X, MS_T], [True, True])
        margin_case("multilabel_soft_margin_loss(weight)", r,
                    lambda x, t, w: F.multilabel_soft_margin_loss(x, t, weight=w, reduction=r),
                    [SM_X, MS_T, MS_W], [True, True, True])
        for p, m in ((1, 1.0), (2, 1.0), (1, 0.5)):
            margin_case(f"multi_margin_loss(p={p}, margin={m})", r,
                        lambda x, t: F.multi_margin_loss(x, t, p=p, margin=m, reduction=r),
                        [MM_X, MM_T], [True, False])
        for p in (1, 2):
            margin_case(f"multi_margin_loss(p={p}, weight)", r,
                        lambda x, t, w: F.multi_margin_loss(x, t, p=p, weight=w, reduction=r),
                        [MM_X, MM_T, MM_W], [True, False, False])
        margin_case("multi_margin_loss(1-d)", r,
                    lambda x, t: F.multi_margin_loss(x, t, reduction=r),
                    [MM_X[3], arg(2, torch.int64)], [True, False])
        margin_case("multilabel_margin_loss", r,
                    lambda x, t: F.multilabel_margin_loss(x, t, reduction=r),
                    [ML_X, ML_T], [True, False])
        margin_case("multilabel_margin_loss(1-d)", r,
                    lambda x, t: F.multilabel_margin_loss(x, t, reduction=r),
                    [ML_X[0], ML_T[0]], [True, False])
        for m, p, eps, swap in ((1.0, 2.0, 1e-6, False), (1.0, 1.0, 1e-6, True),
                                (0.5, 3.0, 1e-3, True)):
            margin_case(f"triplet_margin_loss(margin={m}, p={p}, eps={eps}, swap={swap})", r,
                        lambda a, b, c: F.triplet_margin_loss(a, b, c, margin=m, p=p, eps=eps,
                                                              swap=swap, reduction=r),
                        [TR_A, TR_P, TR_N], [True, True, True])
        for swap in (False, True):
            margin_case(f"triplet_margin_with_distance_loss(swap={swap})", r,
                        lambda a, b, c: F.triplet_margin_with_distance_loss(
                            a, b, c, margin=1.5, swap=swap, reduction=r),
                        [TR_A, TR_P, TR_N], [True, True, True])
        for log_input in (True, False):
            for full in (False, True):
                margin_case(f"poisson_nll_loss(log_input={log_input}, full={full})", r,
                            lambda x, t: F.poisson_nll_loss(x, t, log_input=log_input,
                                                            full=full, reduction=r),
                            [PO_X if log_input else PO_XP, PO_T], [True, True])
        margin_case("poisson_nll_loss(log_input=False, eps=0.1)", r,
                    lambda x, t: F.poisson_nll_loss(x, t, log_input=False, eps=0.1, reduction=r),
                    [PO_XP, PO_T], [True, True])
        for full, eps, v in ((False, 1e-6, GA_V), (True, 1e-6, GA_V), (False, 0.4, GA_V),
                             (False, 1e-6, GA_V1), (True, 1e-6, GA_V21), (False, 1e-6, GA_V13)):
            shape = "x".join(str(s) for s in v.shape)
            margin_case(f"gaussian_nll_loss(full={full}, eps={eps}, var {shape})", r,
                        lambda x, t, var: F.gaussian_nll_loss(x, t, var, full=full, eps=eps,
                                                              reduction=r),
                        [GA_X, GA_T, v], [True, True, True])


if "--margin" in sys.argv:
    sys.stdout = sys.__stdout__
    margin_cases()
