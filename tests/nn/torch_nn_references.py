"""Reference values of PyTorch's nn modules that tests/nn/test_basic_modules.cc holds (issue 44).

Run: /root/venv/bin/python tests/nn/torch_nn_references.py (any venv with torch; the values
committed in the test are from torch 2.15.0+cu132, CPU, float64). Inputs are the tests'
det_input(shape, salt, lo, step): lo + step * ((i * 7 + salt) % 11) for flat index i.
"""
import torch

torch.set_default_dtype(torch.float64)
print("torch", torch.__version__)


def det_input(shape, salt=0, lo=-2.5, step=0.5):
    n = 1
    for s in shape:
        n *= s
    return torch.tensor([lo + step * ((i * 7 + salt) % 11) for i in range(n)]).reshape(shape)


def show(name, t):
    print(name, list(t.shape), [float("%.17g" % v) for v in t.flatten().tolist()])


# "activation modules give PyTorch's values"
x = det_input([3, 4], 2)
show("x", x)
nn = torch.nn
for name, m in [("ReLU", nn.ReLU()), ("GELU", nn.GELU()), ("GELU_tanh", nn.GELU("tanh")),
                ("SiLU", nn.SiLU()), ("Tanh", nn.Tanh()), ("Sigmoid", nn.Sigmoid()),
                ("Softmax1", nn.Softmax(1)), ("Softmax0", nn.Softmax(0)),
                ("LogSoftmax1", nn.LogSoftmax(1))]:
    show(name, m(x))

# "padding modules give PyTorch's values"
x1 = det_input([1, 2, 3], 1)
x2 = det_input([1, 1, 3, 3], 3)
x3 = det_input([1, 2, 2, 2], 6)
for name, m, inp in [("ZeroPad1d", nn.ZeroPad1d(2), x1),
                     ("ConstantPad1d", nn.ConstantPad1d((1, 2), 3.5), x1),
                     ("ConstantPad2d", nn.ConstantPad2d((1, 0, 2, 1), -1.0), x2),
                     ("ReflectionPad1d", nn.ReflectionPad1d((2, 1)), x1),
                     ("ReplicationPad1d", nn.ReplicationPad1d((1, 2)), x1),
                     ("ReplicationPad2d", nn.ReplicationPad2d((2, 0, 1, 2)), x2),
                     ("CircularPad1d", nn.CircularPad1d((3, 1)), x1),
                     ("CircularPad2d", nn.CircularPad2d(1), x2),
                     ("ConstantPad3d", nn.ConstantPad3d((1, 0, 0, 1, 1, 0), 0.5), x3),
                     ("ReplicationPad3d", nn.ReplicationPad3d((0, 1, 1, 0, 0, 1)), x3),
                     ("CircularPad3d", nn.CircularPad3d(1), x3),
                     ("ReflectionPad3d", nn.ReflectionPad3d((1, 0, 0, 1, 1, 0)), x3),
                     ("ZeroPad3d", nn.ZeroPad3d((0, 1, 0, 0, 1, 0)), x3)]:
    show(name, m(inp))

# "Flatten and Unflatten": shapes
print("Flatten()", list(nn.Flatten()(torch.zeros(2, 3, 4, 5)).shape))
print("Flatten(0,2)", list(nn.Flatten(0, 2)(torch.zeros(2, 3, 4, 5)).shape))
print("Unflatten(1,(2,-1))", list(nn.Unflatten(1, (2, -1))(torch.zeros(3, 8)).shape))

# "Sequential": state_dict keys and children names
seq = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Dropout(), nn.Linear(3, 2))
print("Sequential keys", list(seq.state_dict().keys()))
seq.append(nn.Tanh())
print("Sequential children", [n for n, _ in seq.named_children()], type(seq[-1]).__name__)
print("Dropout p", nn.Dropout().p)
try:
    nn.Dropout(1.5)
except ValueError as e:
    print("Dropout(1.5) raises:", e)

# "Embedding padding_idx": the table's gradient of sum(out * c), padding row zero.
w = det_input([5, 3], 4)
idx = torch.tensor([[0, 2, 4], [2, 1, 4]])
c = det_input([2, 3, 3], 5)
for pad in [2, -1]:
    wp = w.clone().requires_grad_()
    out = torch.nn.functional.embedding(idx, wp, padding_idx=pad)
    (out * c).sum().backward()
    show("embedding grad padding_idx=%d" % pad, wp.grad)
e = nn.Embedding(5, 3, padding_idx=-2)
print("Embedding(5,3,padding_idx=-2).padding_idx", e.padding_idx, "row zero",
      bool((e.weight[3] == 0).all()))
try:
    nn.Embedding(5, 3, padding_idx=5)
except AssertionError as e:
    print("Embedding padding_idx=5 raises:", e)

# "Conv and ConvTranspose modules take an unbatched input" (test_conv_modules.cc, round 6):
# weight = det_input(shape, 3), input det_input([C, L], 1), gradients of sum(out * c).
def conv_case(name, m, shape, with_dbias=False):
    with torch.no_grad():
        m.weight.copy_(det_input(list(m.weight.shape), 3, -1.0, 0.25))
        if m.bias is not None:
            m.bias.copy_(torch.tensor([0.5, -0.25]))
    x = det_input(shape, 1).requires_grad_()
    y = m(x)
    (y * det_input(list(y.shape), 5, -1.0, 0.25)).sum().backward()
    show(name + " out", y)
    show(name + " dx", x.grad)
    show(name + " dweight", m.weight.grad)
    if with_dbias and m.bias is not None:
        show(name + " dbias", m.bias.grad)


conv_case("Conv1d(2,2,2,bias=False)", nn.Conv1d(2, 2, 2, bias=False), [2, 5])
conv_case("ConvTranspose2d(1,2,2,stride=2)", nn.ConvTranspose2d(1, 2, 2, stride=2), [1, 2, 2])

# "LayerNorm bias=False, RMSNorm elementwise_affine=False, InstanceNorm momentum=None"
# (test_norm_layers.cc, issue 44): weight = det_input(shape, 3, -1.0, 0.25), input
# det_input(shape, 1), gradients of sum(out * det_input(out shape, 5, -1.0, 0.25)).
for name, m, shape in [("LayerNorm(4,bias=False)", nn.LayerNorm(4, bias=False), [3, 4]),
                       ("RMSNorm(4,elementwise_affine=False)",
                        nn.RMSNorm(4, elementwise_affine=False), [3, 4])]:
    print(name, "state_dict", list(m.state_dict().keys()))
    if m.weight is not None:
        with torch.no_grad():
            m.weight.copy_(det_input(list(m.weight.shape), 3, -1.0, 0.25))
    x = det_input(shape, 1).requires_grad_()
    y = m(x)
    (y * det_input(list(y.shape), 5, -1.0, 0.25)).sum().backward()
    show(name + " out", y)
    show(name + " dx", x.grad)
    if m.weight is not None:
        show(name + " dweight", m.weight.grad)
m = nn.InstanceNorm1d(3, momentum=None, track_running_stats=True)
print("InstanceNorm1d(momentum=None) state_dict", list(m.state_dict().keys()))
m(det_input([2, 3, 4], 1))
m(det_input([2, 3, 4], 2))
show("InstanceNorm1d(momentum=None) running_mean", m.running_mean)
show("InstanceNorm1d(momentum=None) running_var", m.running_var)
m.eval()
show("InstanceNorm1d(momentum=None) eval out", m(det_input([2, 3, 4], 1)))

# "Conv padding='same' / 'valid' and padding_mode" (test_conv_modules.cc, issue 44): weight
# det_input(shape, 3, -1.0, 0.25), bias [0.5, -0.25], input det_input(shape, 1), gradients of
# sum(out * det_input(out shape, 5, -1.0, 0.25)).
conv_cases = [
    ("Conv1d(1,2,4,padding='same')", nn.Conv1d(1, 2, 4, padding="same"), [1, 1, 6]),
    ("Conv2d(1,2,(2,3),padding='same',dilation=(1,2),padding_mode='reflect')",
     nn.Conv2d(1, 2, (2, 3), padding="same", dilation=(1, 2), padding_mode="reflect"),
     [1, 1, 4, 5]),
    ("Conv1d(2,2,3,padding=2,padding_mode='replicate',bias=False)",
     nn.Conv1d(2, 2, 3, padding=2, padding_mode="replicate", bias=False), [2, 5]),
    ("Conv2d(1,2,3,stride=2,padding=(1,2),padding_mode='circular')",
     nn.Conv2d(1, 2, 3, stride=2, padding=(1, 2), padding_mode="circular"), [1, 1, 4, 4]),
    ("Conv3d(1,2,2,padding='valid')", nn.Conv3d(1, 2, 2, padding="valid"), [1, 1, 2, 3, 2]),
]
for name, m, shape in conv_cases:
    conv_case(name, m, shape, with_dbias=True)
for args in [dict(padding="same", stride=2), dict(padding="full"), dict(padding_mode="mirror")]:
    try:
        nn.Conv1d(1, 1, 3, **args)
    except ValueError as e:
        print("Conv1d", args, "raises:", e)

# "Embedding max_norm / norm_type / scale_grad_by_freq" (task L item 4): weight det_input([5, 3],
# 4), idx and c as above (row 3 is not looked up: max_norm leaves it alone although its norm is
# over; with max_norm 2.6 row 2, norm 2.5, is under and kept); the renormed weight, the output,
# and the table's gradient of sum(out * c).
w = det_input([5, 3], 4)
for max_norm, norm_type, scale, pad in [(2.6, 2.0, False, None), (1.5, 1.0, True, None),
                                        (None, 2.0, True, 2), (1.0, 3.0, True, -1)]:
    wp = w.clone().requires_grad_()
    out = torch.nn.functional.embedding(idx, wp, padding_idx=pad, max_norm=max_norm,
                                        norm_type=norm_type, scale_grad_by_freq=scale)
    (out * c).sum().backward()
    name = "embedding max_norm=%s norm_type=%s scale=%s pad=%s" % (max_norm, norm_type, scale, pad)
    show(name + " weight after", wp.detach())
    show(name + " out", out.detach())
    show(name + " grad", wp.grad)
