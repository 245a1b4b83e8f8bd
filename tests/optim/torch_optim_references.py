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
