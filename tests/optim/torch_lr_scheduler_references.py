"""Reference learning-rate sequences of PyTorch's schedulers that tests/optim/test_lr_scheduler.cc
holds (the lr after construction, then after each step).

Run: python tests/optim/torch_lr_scheduler_references.py (any venv with torch; the values
committed in the test are from torch 2.15.0+cu132). Prints one C++ initializer per case.
"""
import math
import warnings

import torch
from torch.optim import lr_scheduler as S

warnings.filterwarnings("ignore")  # "lr_scheduler.step() before optimizer.step()"
print("// torch", torch.__version__)


def sequence(make, steps, lr=0.1):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    sched = make(opt)
    out = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append(opt.param_groups[0]["lr"])
        assert sched.get_last_lr()[0] == out[-1]
    return out


def warmup_decay(e):  # torchtitan-style linear warmup then linear decay
    return (e + 1) / 4 if e < 4 else max(0.0, (20 - e) / 16)


cases = {
    "LambdaLR": (lambda o: S.LambdaLR(o, lambda e: 0.95**e), 12),
    "LambdaLR warmup_decay": (lambda o: S.LambdaLR(o, warmup_decay), 22),
    "MultiplicativeLR": (lambda o: S.MultiplicativeLR(o, lambda e: 0.9 if e % 2 else 0.8), 8),
    "StepLR": (lambda o: S.StepLR(o, step_size=3, gamma=0.5), 12),
    "MultiStepLR": (lambda o: S.MultiStepLR(o, milestones=[5, 2, 9, 5], gamma=0.1), 11),
    "ConstantLR": (lambda o: S.ConstantLR(o, factor=0.25, total_iters=4), 7),
    "LinearLR": (lambda o: S.LinearLR(o, start_factor=0.01, end_factor=1.0, total_iters=10), 14),
    "LinearLR decay": (lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=6), 9),
    "ExponentialLR": (lambda o: S.ExponentialLR(o, gamma=0.9), 10),
    "PolynomialLR": (lambda o: S.PolynomialLR(o, total_iters=8, power=2.0), 11),
    "CosineAnnealingLR": (lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 33),
    "SequentialLR linear cosine": (lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=5), S.CosineAnnealingLR(o, T_max=10)],
        milestones=[5]), 20),
    "SequentialLR three": (lambda o: S.SequentialLR(
        o, [S.ConstantLR(o, factor=0.5, total_iters=3), S.ExponentialLR(o, gamma=0.9),
            S.StepLR(o, step_size=2, gamma=0.5)], milestones=[4, 8]), 14),
    "SequentialLR lambda": (lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.5, total_iters=3), S.LambdaLR(o, lambda e: 0.9**e)],
        milestones=[3]), 8),
    "ChainedScheduler": (lambda o: S.ChainedScheduler(
        [S.ConstantLR(o, factor=0.1, total_iters=2), S.ExponentialLR(o, gamma=0.9)]), 6),
}
for name, (make, steps) in cases.items():
    values = ", ".join(repr(v) for v in sequence(make, steps))
    print(f'{{"{name}", {{{values}}}}},')
