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
                   ("AdamW weight_decay -0.1", lambda: torch.optim.AdamW([p], lr=0.1, weight_decay=-0.1))]:
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
