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
import warnings

import torch

warnings.filterwarnings("ignore")
torch.set_default_dtype(torch.float64)
F = torch.nn.functional

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
