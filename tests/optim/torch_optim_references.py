"""Reference values of PyTorch's optimizers that tests/optim/test_optim.cc holds.

Run: python tests/optim/torch_optim_references.py (any venv with torch; the values committed in
the test are from torch 2.15.0+cu132, CPU, float64).
"""
import torch

torch.set_default_dtype(torch.float64)
print("torch", torch.__version__)

# test_optim.cc, "AdamW counts each parameter's own steps, as PyTorch's state['step']":
# b has no gradient at the first step.
a = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
b = torch.nn.Parameter(torch.tensor([3.0, -1.0]))
opt = torch.optim.AdamW([a, b], lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = (a * a).sum() + ((b * b * b).sum() if step >= 1 else 0)
    loss.backward()
    opt.step()
    print("step", step, "a", a.tolist(), "b", b.tolist())
print("state steps", {k: v["step"].item() for k, v in opt.state_dict()["state"].items()})

# test_optim.cc, "optimizers refuse what they cannot update": the values PyTorch refuses.
p = torch.nn.Parameter(torch.tensor([1.0]))
for name, make in [("SGD momentum -0.5", lambda: torch.optim.SGD([p], lr=0.1, momentum=-0.5)),
                   ("SGD weight_decay -0.1", lambda: torch.optim.SGD([p], lr=0.1, weight_decay=-0.1)),
                   ("AdamW weight_decay -0.1", lambda: torch.optim.AdamW([p], lr=0.1, weight_decay=-0.1)),
                   # round 8a: "Adam, RMSprop and Adagrad take PyTorch's defaults and refuse ..."
                   ("Adam lr -1", lambda: torch.optim.Adam([p], lr=-1)),
                   ("Adam lr nan", lambda: torch.optim.Adam([p], lr=float("nan"))),
                   ("Adam eps -1e-8", lambda: torch.optim.Adam([p], eps=-1e-8)),
                   ("Adam beta1 1", lambda: torch.optim.Adam([p], betas=(1.0, 0.999))),
                   ("Adam beta2 -0.1", lambda: torch.optim.Adam([p], betas=(0.9, -0.1))),
                   ("Adam weight_decay -0.1", lambda: torch.optim.Adam([p], weight_decay=-0.1)),
                   ("RMSprop lr -0.1", lambda: torch.optim.RMSprop([p], lr=-0.1)),
                   ("RMSprop alpha -0.5", lambda: torch.optim.RMSprop([p], alpha=-0.5)),
                   ("RMSprop momentum -0.5", lambda: torch.optim.RMSprop([p], momentum=-0.5)),
                   ("RMSprop eps -1", lambda: torch.optim.RMSprop([p], eps=-1)),
                   ("RMSprop weight_decay -1", lambda: torch.optim.RMSprop([p], weight_decay=-1)),
                   ("Adagrad lr -1", lambda: torch.optim.Adagrad([p], lr=-1)),
                   ("Adagrad lr_decay -0.1", lambda: torch.optim.Adagrad([p], lr_decay=-0.1)),
                   ("Adagrad weight_decay -1", lambda: torch.optim.Adagrad([p], weight_decay=-1)),
                   ("Adagrad initial_accumulator_value -1",
                    lambda: torch.optim.Adagrad([p], initial_accumulator_value=-1)),
                   ("Adagrad eps -1", lambda: torch.optim.Adagrad([p], eps=-1))]:
    try:
        make()
        print(name, "accepted")
    except ValueError as e:
        print(name, "raises:", e)

# test_optim.cc "clip_grad_value_ clamps every gradient" (issue 44)
a = torch.nn.Parameter(torch.zeros(4))
b = torch.nn.Parameter(torch.zeros(4))
a.grad = torch.tensor([-3.0, 0.5, 2.0, -0.25])
b.grad = torch.tensor([1.5, -1.5, 0.75, float("nan")])
torch.nn.utils.clip_grad_value_([a, b], 1.0)
print("clip_grad_value_ 1.0", a.grad.tolist(), b.grad.tolist())

# test_optim.cc "maximize negates the gradient" (issue 44): loss = sum(p^3), 3 steps, p0 = [1, -2, 0.5].
for name, make in [("SGD", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1,
                                                         weight_decay=0.01, maximize=True)),
                   ("SGD nesterov", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                               nesterov=True, maximize=True)),
                   ("AdamW", lambda ps: torch.optim.AdamW(ps, lr=0.1, weight_decay=0.05,
                                                          maximize=True)),
                   ("AdamW amsgrad", lambda ps: torch.optim.AdamW(ps, lr=0.1, amsgrad=True,
                                                                  maximize=True))]:
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
    opt = make([p])
    for _ in range(3):
        opt.zero_grad()
        (p ** 3).sum().backward()
        opt.step()
    print("maximize", name, [float("%.17g" % v) for v in p.tolist()])

# test_optim.cc "Adam, RMSprop and Adagrad match PyTorch 2.15" (round 8a): each option set over
# a = [1, -2, 0.5] and b = [3, -1], loss c (sum(a^3) + sum(w b^2)) with w = [1.5, -0.5] and c
# = 1, 2, 0.5, 0.25 at steps 0..3 (shrinking gradients: amsgrad's maximum differs), 4 steps;
# b has no gradient at step 1 (zero_grad sets it to None: PyTorch skips it and does not count
# the step in its state["step"]). Some cases attach StepLR(step_size=2, gamma=0.5), stepped after
# every optimizer step. Written to tests/optim/torch_optim_references.h: the parameters after
# each step, the final per-parameter states and step counts (PyTorch's state names), and the
# options as dtensor's hyper-parameter names (betas as beta1 / beta2).
import os

CASES = [
    ("Adam", "default", {"lr": 0.1}, False),
    ("Adam", "weight_decay", {"lr": 0.1, "weight_decay": 0.1}, False),
    ("Adam", "amsgrad", {"lr": 0.1, "betas": (0.9, 0.9), "weight_decay": 0.1, "amsgrad": True},
     False),
    ("Adam", "maximize", {"lr": 0.05, "weight_decay": 0.05, "maximize": True}, False),
    ("Adam", "decoupled_weight_decay", {"lr": 0.1, "weight_decay": 0.1,
                                        "decoupled_weight_decay": True}, False),
    ("Adam", "all", {"lr": 0.1, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.2,
                     "amsgrad": True, "maximize": True, "decoupled_weight_decay": True}, False),
    ("Adam", "StepLR", {"lr": 0.1, "weight_decay": 0.1, "amsgrad": True}, True),
    ("RMSprop", "default", {"lr": 0.01}, False),
    ("RMSprop", "centered", {"lr": 0.01, "centered": True}, False),
    ("RMSprop", "momentum", {"lr": 0.01, "momentum": 0.9}, False),
    ("RMSprop", "alpha", {"lr": 0.02, "alpha": 0.5, "eps": 1e-4}, False),
    ("RMSprop", "all", {"lr": 0.01, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.1,
                        "momentum": 0.5, "centered": True, "maximize": True}, False),
    ("RMSprop", "StepLR", {"lr": 0.01, "momentum": 0.9, "centered": True}, True),
    ("Adagrad", "default", {"lr": 0.1}, False),
    ("Adagrad", "lr_decay", {"lr": 0.1, "lr_decay": 0.5}, False),
    ("Adagrad", "initial_accumulator_value", {"lr": 0.1, "initial_accumulator_value": 0.3},
     False),
    ("Adagrad", "eps", {"lr": 0.1, "eps": 0.5}, False),
    ("Adagrad", "all", {"lr": 0.1, "lr_decay": 0.25, "weight_decay": 0.1,
                        "initial_accumulator_value": 0.2, "eps": 1e-3, "maximize": True}, False),
    ("Adagrad", "StepLR", {"lr": 0.1, "lr_decay": 0.5, "weight_decay": 0.1}, True),
    # Round 9: AdamW, and AdamW with its group's decoupled_weight_decay set to False after the
    # constructor (which does not take it): L2 weight decay, as Adam's.
    ("AdamW", "amsgrad", {"lr": 0.1, "weight_decay": 0.1, "amsgrad": True}, False),
    ("AdamW", "decoupled_weight_decay False", {"lr": 0.1, "weight_decay": 0.1,
                                               "decoupled_weight_decay": False}, False),
]
STEPS = 4
C = [1.0, 2.0, 0.5, 0.25]


def num(v):
    return repr(float(v))


def vec(values):
    return "{" + ", ".join(num(v) for v in values) + "}"


def hyper(options):
    out = []
    for k, v in options.items():
        if k == "betas":
            out += [("beta1", v[0]), ("beta2", v[1])]
        else:
            out.append((k, float(v)))
    return "{" + ", ".join('{"%s", %s}' % (k, num(v)) for k, v in out) + "}"


entries = []
for optimizer, label, options, with_sched in CASES:
    a = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
    b = torch.nn.Parameter(torch.tensor([3.0, -1.0]))
    w = torch.tensor([1.5, -0.5])
    group = {k: options.pop(k) for k in ["decoupled_weight_decay"]
             if optimizer == "AdamW" and k in options}
    opt = getattr(torch.optim, optimizer)([a, b], foreach=False, **options)
    opt.param_groups[0].update(group)
    options.update(group)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5) if with_sched else None
    after = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = C[step] * ((a ** 3).sum() + ((w * b * b).sum() if step != 1 else 0))
        loss.backward()
        opt.step()
        if sched:
            sched.step()
        after.append((a.tolist(), b.tolist()))
    states = []
    for i, p in enumerate([a, b]):
        for name, value in opt.state[p].items():
            if name == "step":
                states.append('{"%d.step", {%s}}' % (i, num(value.item())))
            else:
                states.append('{"%d.%s", %s}' % (i, name, vec(value.tolist())))
    entries.append(
        '    {"%s", "%s", %s, %s,\n     {%s},\n     {%s},\n     {%s}}' %
        (optimizer, label, hyper(options), "true" if with_sched else "false",
         ", ".join(vec(x[0]) for x in after), ", ".join(vec(x[1]) for x in after),
         ", ".join(states)))

header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_optim_references.h")
with open(header, "w") as f:
    f.write("""// Generated by tests/optim/torch_optim_references.py from torch %s (CPU, float64,
// foreach=False): do not edit. Adam, RMSprop, Adagrad and AdamW over a = [1, -2, 0.5],
// b = [3, -1], loss c (sum(a^3) + sum([1.5, -0.5] b^2)), c = 1, 2, 0.5, 0.25 at steps 0..3, b
// without a gradient at step 1; `step_lr`: StepLR(2, 0.5) stepped after each step. The
// parameters after each step and the final states ("<i>.step": PyTorch's per-parameter
// state["step"]).
// clang-format off
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace dtensor::test {

struct TorchOptimReference {
  const char* optimizer;
  const char* label;
  std::vector<std::pair<std::string, double>> hyper_parameters;
  bool step_lr;
  std::vector<std::vector<double>> a, b;  // after each step
  std::vector<std::pair<std::string, std::vector<double>>> states;
};

inline const std::vector<TorchOptimReference>& torch_optim_references() {
  static const std::vector<TorchOptimReference> refs = {
%s};
  return refs;
}

}  // namespace dtensor::test
// clang-format on
""" % (torch.__version__, ",\n".join(entries)))
print("wrote", header)
