"""Reference values of PyTorch's autograd semantics that tests/autograd/test_engine.cc holds.

Run: python tests/autograd/torch_autograd_references.py (any venv with torch; the values
committed in the test are from torch 2.15.0+cu132, CPU, float64).
"""
import torch

torch.set_default_dtype(torch.float64)
print("torch", torch.__version__)

# "autograd: retain_grad keeps the gradient the hooks made, and follows in-place ops"
for retain_first in (True, False):
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a * 3
    if retain_first:
        b.retain_grad()
    b.register_hook(lambda g: g * 10)
    if not retain_first:
        b.retain_grad()
    (b * b).sum().backward()
    print("retain first" if retain_first else "hook first", b.grad.tolist(), a.grad.tolist())
a = torch.tensor([1.0, 2.0], requires_grad=True)
b = a * 3
b.retain_grad()
seen = []
b.register_hook(lambda g: seen.append(g.tolist()))
b.mul_(2)
b.register_hook(lambda g: g * 10)
(b * b).sum().backward()
print("through mul_: b.grad", b.grad.tolist(), "a.grad", a.grad.tolist(), "old hook saw", seen)

# "autograd: requires_grad_ errors": a non-leaf asked to require grad is left as it is.
y = torch.tensor([1.0], requires_grad=True) * 2
y.requires_grad_()
print("non-leaf requires_grad_()", y.requires_grad, y.is_leaf)
