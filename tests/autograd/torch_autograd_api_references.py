"""Reference values of torch.autograd.grad and of the backward hooks that
tests/autograd/test_autograd_api.cc holds (values and hook call orders).

Run: python tests/autograd/torch_autograd_api_references.py (any venv with torch; the values
committed in the test are from torch 2.15.0+cu132, CPU, float64).
"""
import torch

torch.set_default_dtype(torch.float64)
print("torch", torch.__version__)


def leaves():
    x = (torch.arange(6.0) / 10).reshape(2, 3).requires_grad_()
    w1 = (torch.arange(12.0) / 7 - 0.5).reshape(3, 4).requires_grad_()
    w2 = (torch.arange(8.0) / 5 - 0.3).reshape(4, 2).requires_grad_()
    u = torch.ones(2, requires_grad=True)  # never used
    return x, w1, w2, u


def r6(t):
    return [round(v, 6) for v in t.flatten().tolist()]


# "autograd.grad: the gradients of a Linear chain with a branch used twice, w.r.t. a leaf and a
# non-leaf; no .grad changes; hooks on the inputs and on the path run; retain_grad populates"
x, w1, w2, u = leaves()
order = []
h = x @ w1  # non-leaf input
h.register_hook(lambda g: order.append("h"))
w1.register_hook(lambda g: order.append("w1"))
w2.register_hook(lambda g: order.append("w2"))  # not on a path to an input: does not run
x.register_hook(lambda g: order.append("x"))
w1.register_post_accumulate_grad_hook(lambda p: order.append("w1 post"))
r = h * h + h  # h used twice
r.retain_grad()
y = r @ w2
loss = (y * y).sum()
gw1, gh = torch.autograd.grad(loss, [w1, h], retain_graph=True)
print("hook order", order, "grads of leaves", w1.grad, w2.grad, x.grad)
print("gw1", r6(gw1))
print("gh", r6(gh))
print("r.grad", r6(r.grad))
gx, = torch.autograd.grad(loss, [x], retain_graph=True)
print("gx", r6(gx))

# "autograd.grad: an input whose node also runs is taken before its hooks, otherwise after"
h.register_hook(lambda g: g * 2)
a, = torch.autograd.grad(loss, [h], retain_graph=True)
b, c = torch.autograd.grad(loss, [h, x], retain_graph=True)
print("alone / gh", (a / gh).flatten()[0].item(), "with x / gh", (b / gh).flatten()[0].item(),
      "x / gx", (c / gx).flatten()[0].item())

# "autograd.grad: unused inputs"
try:
    torch.autograd.grad(loss, [w1, u], retain_graph=True)
except RuntimeError as e:
    print("unused:", e)
print("allow_unused", torch.autograd.grad(loss, [w1, u], retain_graph=True, allow_unused=True)[1])
print("materialize", torch.autograd.grad(loss, [w1, u], retain_graph=True,
                                         materialize_grads=True)[1])

# "post accumulate grad hooks: after the tensor hooks and the accumulation, see the parameter"
x, w1, w2, u = leaves()
order = []
w1.register_post_accumulate_grad_hook(lambda p: order.append(("post", r6(p.grad)[:2])))
w1.register_hook(lambda g: order.append("hook") or g * 2)
((x @ w1) @ w2).sum().backward()
print("post accumulate", order)

# "module full backward hooks: order, grad_input / grad_output, replacements"
l1 = torch.nn.Linear(3, 4)
l2 = torch.nn.Linear(4, 2)
with torch.no_grad():
    l1.weight.copy_((torch.arange(12.0) / 7 - 0.5).reshape(4, 3))
    l1.bias.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
    l2.weight.copy_((torch.arange(8.0) / 5 - 0.3).reshape(2, 4))
    l2.bias.copy_(torch.tensor([0.05, -0.05]))
events = []
for name, m in (("l1", l1), ("l2", l2)):
    m.register_forward_pre_hook(lambda m, a, name=name: events.append(name + " fwd pre"))
    m.register_forward_hook(lambda m, a, o, name=name: events.append(name + " fwd"))
    m.register_full_backward_pre_hook(
        lambda m, go, name=name: events.append((name + " bwd pre", r6(go[0]))))
    m.register_full_backward_hook(lambda m, gi, go, name=name: events.append(
        (name + " bwd", None if gi[0] is None else r6(gi[0]), r6(go[0]))))
xin = (torch.arange(6.0) / 10).reshape(2, 3)  # does not require grad
out = l2(l1(xin))
(out * out).sum().backward()
for e in events:
    print("event", e)
print("l1.weight.grad", r6(l1.weight.grad))

# The same with replacements: l2's pre-hook doubles grad_output, l2's hook halves grad_input
# (twice: the second hook sees the first one's return).
for m in (l1, l2):
    m.weight.grad = None
    m.bias.grad = None
    m._backward_hooks.clear()
    m._backward_pre_hooks.clear()
l2.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
l2.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5,))
seen = []
l2.register_full_backward_hook(lambda m, gi, go: seen.append(r6(gi[0])[:2]) or (gi[0] * 0.5,))
out = l2(l1(xin))
(out * out).sum().backward()
print("replaced: l2.weight.grad", r6(l2.weight.grad)[:4], "l1.weight.grad", r6(l1.weight.grad)[:4],
      "second hook saw", seen)

# Module forward hooks and handles (tests/nn/test_modules.cc "module hooks: ..."), float64.
# "forward hooks see the input, None keeps, a value replaces; prepend; handles remove"
lin = torch.nn.Linear(2, 2, bias=False)
with torch.no_grad():
    lin.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
events = []
lin.register_forward_pre_hook(lambda m, a: events.append(("pre", r6(a[0]))))  # None keeps
lin.register_forward_pre_hook(lambda m, a: (a[0] * 2,))
lin.register_forward_pre_hook(lambda m, a: events.append(("pre first", r6(a[0]))), prepend=True)
lin.register_forward_hook(lambda m, a, o: events.append(("fwd", r6(a[0]), r6(o))))
h_add = lin.register_forward_hook(lambda m, a, o: o + 1)
lin.register_forward_hook(lambda m, a, o: events.append(("fwd first", r6(o))), prepend=True)
xin = torch.tensor([[1.0, -1.0]])
print("hooks: out", r6(lin(xin)))
for e in events:
    print("hooks: event", e)
h_add.remove()
h_add.remove()  # idempotent
print("hooks: removed, out", r6(lin(xin)))

# "removal inside a hook: the call in progress still runs the removed hook, the next does not"
lin = torch.nn.Linear(2, 2)
events = []
h2 = None
lin.register_forward_hook(lambda m, a, o: events.append("f1") or h2.remove())
h2 = lin.register_forward_hook(lambda m, a, o: events.append("f2"))
lin(xin)
lin(xin)
print("remove inside a hook", events)

# "always_call: runs when forward raised, with output None; a plain hook does not run"
events = []
lin = torch.nn.Linear(2, 2)
lin.register_forward_pre_hook(lambda m, a: (a[0][:, :1],))  # forward then raises (shape)
lin.register_forward_hook(lambda m, a, o: events.append("plain"))
lin.register_forward_hook(lambda m, a, o: events.append(("always", list(a[0].shape), o)),
                          always_call=True)
try:
    lin(xin)
except RuntimeError:
    events.append("raised")
print("always_call", events)

# "two-input module hooks: args of two, grad_input of two (zeros for the target), replacement"
a = torch.tensor([0.1, 0.5, -0.3, 0.8], requires_grad=True)
b = torch.tensor([0.0, 1.0, 0.5, -0.5])
mse = torch.nn.MSELoss()
events = []
mse.register_forward_pre_hook(lambda m, args: (args[0] * 2, args[1]))
mse.register_forward_hook(lambda m, args, o: events.append(("fwd", r6(args[0]), r6(o))))
mse.register_full_backward_pre_hook(lambda m, go: events.append(("bwd pre", r6(go[0]))))
mse.register_full_backward_hook(lambda m, gi, go: events.append(
    ("bwd", r6(gi[0]), r6(gi[1]), r6(go[0]))) or (gi[0] * 0.5, gi[1]))
h_bwd = mse.register_full_backward_hook(lambda m, gi, go: events.append(("bwd 2", r6(gi[0]))))
loss = mse(a, b)
h_bwd.remove()  # removed after the forward: this backward still runs it
(loss * 3).backward()
for e in events:
    print("two-input: event", e)
print("two-input: a.grad", r6(a.grad), "b.grad", b.grad)
# Both inputs require grad: a hook's None entry gives that input no gradient.
a.grad = None
b.requires_grad_()
mse = torch.nn.MSELoss()
mse.register_full_backward_hook(lambda m, gi, go: (None, gi[1] * 10))
mse(a, b).backward()
print("two-input both: a.grad", a.grad, "b.grad", r6(b.grad))


# create_graph (double backward), float64, printed in full (the test compares at 1e-12).
def full(name, t):
    print(name, "{" + ", ".join(repr(v) for v in t.detach().flatten().tolist()) + "}")


# "create_graph: grad of grad of x^3 + sin + exp, and of softmax / log_softmax"
x = torch.tensor([0.3, -0.7, 1.2, 2.0], requires_grad=True)
g, = torch.autograd.grad((x * x * x + torch.sin(x) + torch.exp(x)).sum(), x, create_graph=True)
full("cg g", g)
full("cg gg", torch.autograd.grad((g * g).sum(), x)[0])
m = torch.tensor([[0.3, -0.7, 1.2], [2.0, 0.1, -0.4]], requires_grad=True)
c = torch.tensor([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])
for name, f in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
    g, = torch.autograd.grad((f(m, 1) * c).sum(), m, create_graph=True)
    full("cg " + name + " g", g)
    full("cg " + name + " gg", torch.autograd.grad((g * g).sum(), m)[0])

# "create_graph: a Hessian-vector product"
W = torch.arange(12.0).reshape(4, 3) / 7 - 0.6
v = torch.tensor([[0.5], [-0.2], [0.9]], requires_grad=True)
u = torch.tensor([[1.0], [-1.0], [0.5]])
s = (v * v).sum()
f = torch.exp(W @ v).mean() + torch.tanh(W @ v).sum() + s * s
g, = torch.autograd.grad(f, v, create_graph=True)
full("hvp g", g)
full("hvp", torch.autograd.grad(g, v, u)[0])

# "create_graph: gradient penalty of an MLP"
acts = (("tanh", torch.tanh), ("gelu", torch.nn.functional.gelu),
        ("gelu_tanh", lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
        ("silu", torch.nn.functional.silu), ("sigmoid", torch.sigmoid))
for name, act in acts:
    x = (torch.arange(12.0).reshape(4, 3) / 10 - 0.5).requires_grad_()
    W1 = (torch.arange(15.0).reshape(5, 3) / 9 - 0.8).requires_grad_()
    b1 = (torch.arange(5.0) / 10 - 0.2).requires_grad_()
    W2 = (torch.arange(5.0).reshape(1, 5) / 4 - 0.5).requires_grad_()
    b2 = torch.tensor([0.1], requires_grad=True)
    out = torch.nn.functional.linear(act(torch.nn.functional.linear(x, W1, b1)), W2, b2)
    gx, = torch.autograd.grad(out.sum(), x, create_graph=True)
    (gx * gx).sum().backward()
    full("gp " + name + " gx", gx)
    full("gp " + name + " W1", W1.grad)
    full("gp " + name + " b1", b1.grad)
    full("gp " + name + " W2", W2.grad)
    print("gp", name, "b2.grad", b2.grad)

# "create_graph: backward(create_graph) then a second backward"
x = torch.tensor([0.3, -0.7, 1.2], requires_grad=True)
(x * x * x).sum().backward(create_graph=True)
g = x.grad
print("backward cg: grad requires_grad", g.requires_grad, "is_leaf", g.is_leaf)
x.grad = None
(g * g).sum().backward()
full("backward cg second", x.grad)

# "create_graph: layer_norm, rms_norm, mse_loss and cross_entropy: grad of grad"
F = torch.nn.functional
xs = torch.sin(torch.arange(24.0)).reshape(2, 3, 4)
c = torch.cos(torch.arange(24.0) * 0.7).reshape(2, 3, 4)
for name, norm, shape in (("ln", lambda x, w, b: F.layer_norm(x, (4,), w, b, 1e-5), (4,)),
                          ("ln2", lambda x, w, b: F.layer_norm(x, (3, 4), None, None, 1e-5), (3, 4)),
                          ("rms", lambda x, w, b: F.rms_norm(x, (4,), w, 1e-6), (4,))):
    x = xs.clone().requires_grad_()
    w = (torch.arange(4.0) / 4 + 0.5).requires_grad_()
    b = (torch.arange(4.0) / 8 - 0.2).requires_grad_()
    gx, gw = torch.autograd.grad((norm(x, w, b) * c).sum(), [x, w], create_graph=True,
                                 allow_unused=True)
    full("cg " + name + " gx", gx)
    p = (gx * gx).sum() + ((gw * gw).sum() if gw is not None else 0)
    hx, hw = torch.autograd.grad(p, [x, w], allow_unused=True)
    full("cg " + name + " hx", hx)
    if hw is not None:
        full("cg " + name + " hw", hw)
x = (torch.arange(6.0).reshape(3, 2) / 5 - 0.4).requires_grad_()
y = torch.cos(torch.arange(6.0)).reshape(3, 2)
for red in ("mean", "sum"):
    g, = torch.autograd.grad(F.mse_loss(torch.tanh(x), y, reduction=red), x, create_graph=True)
    full("cg mse " + red + " g", g)
    full("cg mse " + red + " gg", torch.autograd.grad((g * g).sum(), x)[0])
logits = (torch.sin(torch.arange(12.0)).reshape(3, 4)).requires_grad_()
g, = torch.autograd.grad(F.cross_entropy(logits, torch.tensor([0, 3, 1])), logits,
                         create_graph=True)
full("cg ce g", g)
full("cg ce gg", torch.autograd.grad((g * g).sum(), logits)[0])
