"""Reference values for test_loss_double_backward.cc: a gradient penalty through a Linear layer
and each loss, with PyTorch 2.15 (CPU, float64, printed in full; the test compares at 1e-12).

z = x W^T + b (x [4, 3], W [5, 3], b [5]); L = loss(f(z), target); g = dL/d(x, W, b[, target])
with create_graph; P = sum of the squares of g; the references are g and dP/d(x, W, b[, target]).
Run: /root/venv/bin/python tests/ops/loss/torch_loss_double_backward_references.py \
       > tests/ops/loss/loss_double_backward_refs.inc
"""
import math

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def vals(n, f):
    return [f(k) for k in range(n)]


X = vals(12, lambda k: math.sin(0.37 * k + 0.2))
W = vals(15, lambda k: 0.8 * math.cos(0.23 * k - 0.4))
B = vals(5, lambda k: 0.1 * k - 0.2)
Y = vals(20, lambda k: 0.9 * math.cos(0.51 * k))          # regression targets
P = vals(20, lambda k: 0.5 + 0.45 * math.sin(0.73 * k))   # probabilities in (0.05, 0.95)
CW = vals(5, lambda c: 0.5 + 0.3 * c)                     # class / element weights
PW = vals(5, lambda c: 1.5 - 0.2 * c)                     # pos_weight
T = [1, 4, 2, 0]                                          # class targets, 2 ignored


def t(v, shape, grad=True):
    return torch.tensor(v).reshape(shape).requires_grad_(grad)


def norm_probs(p):  # rows of P normalised (kl_div's target distribution)
    q = torch.tensor(p).reshape(4, 5)
    return (q / q.sum(1, keepdim=True)).reshape(-1).tolist()


Q = norm_probs(P)

# name -> (loss of z and target, target values or None, target requires grad)
CASES = {
    "l1_mean": (lambda z, y: F.l1_loss(z, y), Y, True),
    "smooth_l1_mean": (lambda z, y: F.smooth_l1_loss(z, y, beta=0.7), Y, True),
    "smooth_l1_beta0_sum": (lambda z, y: F.smooth_l1_loss(z, y, reduction="sum", beta=0.0), Y,
                            True),
    "huber_mean": (lambda z, y: F.huber_loss(z, y, delta=0.8), Y, True),
    "huber_none": (lambda z, y: (F.huber_loss(z, y, reduction="none", delta=0.5)
                                 * torch.tensor(P).reshape(4, 5)).sum(), Y, True),
    "bce_weight_mean": (lambda z, y: F.binary_cross_entropy(
        torch.sigmoid(z), y, weight=torch.tensor(CW)), P, True),
    "bce_sum": (lambda z, y: F.binary_cross_entropy(torch.sigmoid(z), y, reduction="sum"), P,
                True),
    "bce_logits_weight_pos_mean": (lambda z, y: F.binary_cross_entropy_with_logits(
        z, y, weight=torch.tensor(CW), pos_weight=torch.tensor(PW)), P, True),
    "bce_logits_sum": (lambda z, y: F.binary_cross_entropy_with_logits(z, y, reduction="sum"), P,
                       True),
    "kl_div_batchmean": (lambda z, y: F.kl_div(F.log_softmax(z, 1), y, reduction="batchmean"), Q,
                         True),
    "kl_div_log_target_sum": (lambda z, y: F.kl_div(F.log_softmax(z, 1), torch.log(y),
                                                    reduction="sum", log_target=True), Q, True),
    "nll_weight_mean": (lambda z, y: F.nll_loss(F.log_softmax(z, 1), torch.tensor(T),
                                                weight=torch.tensor(CW), ignore_index=2), None,
                        False),
    "nll_weight_none": (lambda z, y: (F.nll_loss(F.log_softmax(z, 1), torch.tensor(T),
                                                 weight=torch.tensor(CW), ignore_index=2,
                                                 reduction="none") * torch.tensor(B[:4])).sum(),
                        None, False),
    "cross_entropy_weight_mean": (lambda z, y: F.cross_entropy(z, torch.tensor(T),
                                                               weight=torch.tensor(CW),
                                                               ignore_index=2), None, False),
    "cross_entropy_weight_smooth_sum": (lambda z, y: F.cross_entropy(
        z, torch.tensor(T), weight=torch.tensor(CW), ignore_index=2, label_smoothing=0.1,
        reduction="sum"), None, False),
}


def camel(name):
    return "".join(p.capitalize() for p in name.split("_"))


def emit(name, values):
    print(f"// {name}")
    print(f"inline const std::vector<double> k{camel(name)} = {{"
          + ", ".join(repr(float(v)) for v in values) + "};")


print("// The gradient-penalty reference values of torch_loss_double_backward_references.py")
print(f"// (torch {torch.__version__.split('+')[0]}, CPU, float64, printed in full), for "
      "test_loss_double_backward.cc.")
print("#pragma once\n\n#include <vector>\n\nnamespace dtensor::test::loss_dbl_refs {\n")
for name, (loss, target, target_grad) in CASES.items():
    x, w, b = t(X, (4, 3)), t(W, (5, 3)), t(B, (5,))
    ins = [x, w, b]
    y = None
    if target is not None:
        y = t(target, (4, 5), target_grad)
        if target_grad:
            ins.append(y)
    z = x @ w.T + b
    g = torch.autograd.grad(loss(z, y), ins, create_graph=True)
    penalty = sum((gi * gi).sum() for gi in g)
    h = torch.autograd.grad(penalty, ins, allow_unused=True, materialize_grads=True)
    emit(name + "_g", torch.cat([gi.reshape(-1) for gi in g]).tolist())
    emit(name + "_h", torch.cat([hi.reshape(-1) for hi in h]).tolist())
print("\n}  // namespace dtensor::test::loss_dbl_refs")
