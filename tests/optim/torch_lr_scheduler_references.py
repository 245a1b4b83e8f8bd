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
    # Round 8b.
    "OneCycleLR": (lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=10), 10),
    "OneCycleLR linear three_phase": (lambda o: S.OneCycleLR(
        o, max_lr=0.5, total_steps=12, pct_start=0.25, anneal_strategy="linear",
        three_phase=True), 12),
    "OneCycleLR epochs": (lambda o: S.OneCycleLR(
        o, max_lr=0.3, epochs=2, steps_per_epoch=5, cycle_momentum=False), 9),
    "CosineAnnealingWarmRestarts": (lambda o: S.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.01), 20),
    "CosineAnnealingWarmRestarts T_mult 1": (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=4), 10),
}
for name, (make, steps) in cases.items():
    values = ", ".join(repr(v) for v in sequence(make, steps))
    print(f'{{"{name}", {{{values}}}}},')


# Round 8b: 3 steps, the optimizer's and scheduler's states saved, a scheduler built with other
# arguments on a new optimizer, both states loaded, 3 more steps: the 6 learning rates (PyTorch's
# load_state_dict overwrites the hyper-parameters; the lambdas are not saved: the new ones run).
others = {
    "LambdaLR": lambda o: S.LambdaLR(o, lambda e: 0.5**e),
    "MultiplicativeLR": lambda o: S.MultiplicativeLR(o, lambda e: 0.5),
    "StepLR": lambda o: S.StepLR(o, step_size=1, gamma=0.9),
    "MultiStepLR": lambda o: S.MultiStepLR(o, milestones=[1, 3], gamma=0.5),
    "ConstantLR": lambda o: S.ConstantLR(o, factor=0.5, total_iters=2),
    "LinearLR": lambda o: S.LinearLR(o, start_factor=0.5, end_factor=0.9, total_iters=3),
    "ExponentialLR": lambda o: S.ExponentialLR(o, gamma=0.5),
    "PolynomialLR": lambda o: S.PolynomialLR(o, total_iters=4, power=1.0),
    "CosineAnnealingLR": lambda o: S.CosineAnnealingLR(o, T_max=3, eta_min=0.05),
    "SequentialLR linear cosine": lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.5, total_iters=2), S.CosineAnnealingLR(o, T_max=3)],
        milestones=[2]),
    "ChainedScheduler": lambda o: S.ChainedScheduler(
        [S.ConstantLR(o, factor=0.5, total_iters=5), S.ExponentialLR(o, gamma=0.5)]),
    "OneCycleLR": lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=30,
                                         anneal_strategy="linear"),
    "CosineAnnealingWarmRestarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=5, eta_min=0.0),
}


def resumed(name):
    make = cases[name][0]
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = make(opt)
    out = []
    for _ in range(3):
        opt.step()
        sched.step()
        out.append(opt.param_groups[0]["lr"])
    o_state, s_state = opt.state_dict(), sched.state_dict()
    q = torch.nn.Parameter(torch.zeros(1))
    opt2 = torch.optim.SGD([q], lr=0.7)
    sched2 = others[name](opt2)
    opt2.load_state_dict(o_state)
    sched2.load_state_dict(s_state)
    for _ in range(3):
        opt2.step()
        sched2.step()
        out.append(opt2.param_groups[0]["lr"])
    return out


print("// resumed with other arguments")
for name in others:
    print(f'{{"{name}", {{{", ".join(repr(v) for v in resumed(name))}}}}},')

# OneCycleLR's momentum cycling: (lr, momentum or beta1) after construction and each step.
print("// OneCycleLR momentum")
for label, make_opt in (
        ("SGD", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
        ("AdamW", lambda ps: torch.optim.AdamW(ps, lr=0.1))):
    for three in (False, True):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = make_opt([p])
        sched = S.OneCycleLR(opt, max_lr=0.5, total_steps=8, three_phase=three,
                             base_momentum=0.8, max_momentum=0.9)
        g = opt.param_groups[0]
        m = lambda: g["betas"][0] if "betas" in g else g["momentum"]
        out = [m()]
        for _ in range(8):
            opt.step()
            sched.step()
            out.append(m())
        print(f'{{"{label} {three}", {{{", ".join(repr(v) for v in out)}}}}},')

# ReduceLROnPlateau: the lr after each step(metric).
print("// ReduceLROnPlateau")
metrics = [1.0, 0.9, 0.95, 0.9, 0.92, 0.8999, 0.85, 0.86, 0.87, 0.88, 0.5, 0.6, 0.7, 0.8, 0.9,
           0.95, 0.97, 0.99]
plateaus = {
    "min rel": lambda o: S.ReduceLROnPlateau(o, patience=2, factor=0.5, cooldown=1, min_lr=0.02),
    "min abs": lambda o: S.ReduceLROnPlateau(o, patience=1, threshold=0.05,
                                             threshold_mode="abs"),
    "max rel": lambda o: S.ReduceLROnPlateau(o, mode="max", patience=0, factor=0.3,
                                             threshold=0.1, eps=0.01),
    "max abs": lambda o: S.ReduceLROnPlateau(o, mode="max", patience=1, threshold=0.02,
                                             threshold_mode="abs", cooldown=2, factor=0.9),
}
for name, make in plateaus.items():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = make(opt)
    out = []
    for v in metrics:
        opt.step()
        sched.step(v)
        out.append(opt.param_groups[0]["lr"])
    print(f'{{"{name}", {{{", ".join(repr(v) for v in out)}}}}},')
# Resumed: 9 steps of "min rel", states saved, a ReduceLROnPlateau(mode="max", factor=0.9,
# patience=5) loaded, 9 more.
p = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=0.1)
sched = plateaus["min rel"](opt)
out = []
for v in metrics[:9]:
    opt.step()
    sched.step(v)
    out.append(opt.param_groups[0]["lr"])
o_state, s_state = opt.state_dict(), sched.state_dict()
opt2 = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.7)
sched2 = S.ReduceLROnPlateau(opt2, mode="max", factor=0.9, patience=5)
opt2.load_state_dict(o_state)
sched2.load_state_dict(s_state)
for v in metrics[9:]:
    opt2.step()
    sched2.step(v)
    out.append(opt2.param_groups[0]["lr"])
print(f'{{"resumed", {{{", ".join(repr(v) for v in out)}}}}},')

# OneCycleLR first in a SequentialLR (round 9): SequentialLR's constructor runs the first
# scheduler's _initial_step, whose get_lr sets the momentum again (here set by hand to 0.5 after
# OneCycleLR's constructor). (lr, momentum or beta1) after construction and each of 6 steps.
print("// OneCycleLR first in SequentialLR")
for label, make_opt in (
        ("SGD", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
        ("AdamW", lambda ps: torch.optim.AdamW(ps, lr=0.1))):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = make_opt([p])
    g = opt.param_groups[0]
    m = lambda: g["betas"][0] if "betas" in g else g["momentum"]
    s1 = S.OneCycleLR(opt, max_lr=0.5, total_steps=4, base_momentum=0.8, max_momentum=0.9)
    if "betas" in g:
        g["betas"] = (0.5, g["betas"][1])
    else:
        g["momentum"] = 0.5
    s2 = S.ConstantLR(opt, factor=0.5, total_iters=2)
    seq = S.SequentialLR(opt, [s1, s2], milestones=[4])
    out = [g["lr"], m()]
    for _ in range(6):
        opt.step()
        seq.step()
        out += [g["lr"], m()]
    print(f'{{"{label}", {{{", ".join(repr(v) for v in out)}}}}},')
