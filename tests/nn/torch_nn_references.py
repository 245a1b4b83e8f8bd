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

# Recurrent layers (tests/nn/test_recurrent_modules.cc): each module built in float64 after
# torch.manual_seed(case index), so its parameters are PyTorch's own initial values; x =
# det_input(x shape, 1, -1.0, 0.25), h0 / c0 = det_input(shape, 2 / 3, -0.5, 0.1); the gradients
# are of sum(out * det_input(out shape, 5, -1.0, 0.25)) + sum(h_n * det_input(.., 6, ..)) +
# sum(c_n * det_input(.., 7, ..)). Written, with every parameter by its state_dict name, to
# tests/nn/recurrent_references.inc (a C++ initializer list the test includes).
import os  # noqa: E402

rnn_cases = [
    ("LSTM 2 layers bidirectional h0 c0",
     lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True), [3, 2, 3], [4, 2, 4], [4, 2, 4]),
    ("LSTM proj_size batch_first", lambda: nn.LSTM(3, 5, proj_size=2, batch_first=True),
     [2, 3, 3], None, None),
    ("LSTM unbatched 2 layers proj_size h0 c0",
     lambda: nn.LSTM(3, 4, num_layers=2, proj_size=3), [4, 3], [2, 3], [2, 4]),
    ("GRU 2 layers bidirectional batch_first h0",
     lambda: nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True), [2, 3, 3],
     [4, 2, 4], None),
    ("GRU bias=False", lambda: nn.GRU(3, 4, bias=False), [3, 2, 3], None, None),
    ("RNN relu 2 layers h0", lambda: nn.RNN(3, 4, num_layers=2, nonlinearity="relu"), [3, 2, 3],
     [2, 2, 4], None),
    ("RNN tanh unbatched bidirectional h0", lambda: nn.RNN(3, 4, bidirectional=True), [4, 3],
     [2, 4], None),
    ("RNNCell relu h", lambda: nn.RNNCell(3, 4, nonlinearity="relu"), [2, 3], [2, 4], None),
    ("LSTMCell h c", lambda: nn.LSTMCell(3, 4), [2, 3], [2, 4], [2, 4]),
    ("GRUCell h", lambda: nn.GRUCell(3, 4), [2, 3], [2, 4], None),
    ("GRUCell unbatched", lambda: nn.GRUCell(3, 4, bias=False), [3], None, None),
    ("LSTM 2 layers bidirectional proj_size batch_first h0 c0",
     lambda: nn.LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True, proj_size=2),
     [2, 3, 3], [4, 2, 2], [4, 2, 4]),
]


def cpp_tensor(name, t):
    vals = ", ".join("%.17g" % v for v in t.detach().flatten().tolist())
    return '      {"%s", {%s}, {%s}},\n' % (name, ", ".join(str(s) for s in t.shape), vals)


lines = ["// Generated by tests/nn/torch_nn_references.py (torch %s, CPU, float64): do not edit.\n"
         % torch.__version__]
for seed, (name, make, xs, hs, cs) in enumerate(rnn_cases):
    torch.manual_seed(seed)
    m = make()
    x = det_input(xs, 1, -1.0, 0.25).requires_grad_()
    h0 = det_input(hs, 2, -0.5, 0.1).requires_grad_() if hs else None
    c0 = det_input(cs, 3, -0.5, 0.1).requires_grad_() if cs else None
    cell = "Cell" in name
    if cell:
        r = m(x, (h0, c0) if c0 is not None else h0)
        out, h_n, c_n = (r[0], None, r[1]) if isinstance(r, tuple) else (r, None, None)
    else:
        hx = (h0, c0) if c0 is not None else h0
        out, st = m(x, hx)
        h_n, c_n = st if isinstance(st, tuple) else (st, None)
    loss = (out * det_input(list(out.shape), 5, -1.0, 0.25)).sum()
    if h_n is not None:
        loss = loss + (h_n * det_input(list(h_n.shape), 6, -1.0, 0.25)).sum()
    if c_n is not None:
        loss = loss + (c_n * det_input(list(c_n.shape), 7, -1.0, 0.25)).sum()
    loss.backward()
    lines.append('  {"%s",\n   {\n' % name)
    for pn, p in m.named_parameters():
        lines.append(cpp_tensor("param:" + pn, p))
    for tn, t in [("x", x), ("h0", h0), ("c0", c0), ("out", out), ("h_n", h_n), ("c_n", c_n)]:
        if t is not None:
            lines.append(cpp_tensor(tn, t))
    for tn, t in [("x", x), ("h0", h0), ("c0", c0)]:
        if t is not None:
            lines.append(cpp_tensor("grad:" + tn, t.grad))
    for pn, p in m.named_parameters():
        lines.append(cpp_tensor("grad:" + pn, p.grad))
    lines.append("   }},\n")
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "recurrent_references.inc"),
          "w") as f:
    f.writelines(lines)
print("wrote recurrent_references.inc:", len(rnn_cases), "cases")

# Round 9 (helper INV): the simple modules added from torch.nn's inventory (activations in
# tests/nn/test_activation_modules.cc, pools in test_pooling_modules.cc, layers in
# test_basic_modules.cc). Each case: the module built in float64 after torch.manual_seed(case
# index), parameters (set below where PyTorch's initial values are constants) recorded by their
# state_dict names; the input "x" (and "x2" for Bilinear); "out" in the named mode; the gradients
# of sum(out * c) w.r.t. the inputs and every parameter. Written to
# tests/nn/inventory_references.inc.


def ramp(shape, salt, lo=-2.5, step=0.5, tie=0.0):
    """det_input plus tie * flat index (distinct values where a max pool must not see ties)."""
    t = det_input(shape, salt, lo, step)
    return t + tie * torch.arange(t.numel(), dtype=t.dtype).reshape(t.shape)


def prelu3():
    m = nn.PReLU(3, 0.1)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([0.1, -0.2, 0.3]))
    return m


def instance_norm3d():
    m = nn.InstanceNorm3d(2, affine=True)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([0.5, -1.5]))
        m.bias.copy_(torch.tensor([0.25, 0.1]))
    return m


xa = lambda: ramp([3, 5], 2)  # noqa: E731  -2.5 .. 2.5 in steps of 0.5: every kink is hit
inv_cases = [
    # (name, module factory, input(s), eval mode)
    ("Hardtanh()", lambda: nn.Hardtanh(), [xa()], False),
    ("Hardtanh(-0.5,2)", lambda: nn.Hardtanh(-0.5, 2.0), [xa()], False),
    ("Hardswish()", lambda: nn.Hardswish(), [xa()], False),
    ("Hardsigmoid()", lambda: nn.Hardsigmoid(), [xa()], False),
    ("Mish()", lambda: nn.Mish(), [xa()], False),
    ("SELU()", lambda: nn.SELU(), [xa()], False),
    ("LogSigmoid()", lambda: nn.LogSigmoid(), [xa()], False),
    ("Softsign()", lambda: nn.Softsign(), [xa()], False),
    ("Tanhshrink()", lambda: nn.Tanhshrink(), [xa()], False),
    ("Threshold(0.5,-3)", lambda: nn.Threshold(0.5, -3.0), [xa()], False),
    ("Hardshrink()", lambda: nn.Hardshrink(), [xa()], False),
    ("Hardshrink(1)", lambda: nn.Hardshrink(1.0), [xa()], False),
    ("Softshrink()", lambda: nn.Softshrink(), [xa()], False),
    ("Softshrink(1)", lambda: nn.Softshrink(1.0), [xa()], False),
    ("Softmax2d() 4d", lambda: nn.Softmax2d(), [ramp([2, 3, 2, 2], 1)], False),
    ("Softmax2d() 3d", lambda: nn.Softmax2d(), [ramp([3, 2, 2], 4)], False),
    ("PReLU()", lambda: nn.PReLU(), [xa()], False),
    ("PReLU(3) 3d", prelu3, [ramp([2, 3, 4], 5)], False),
    ("RReLU() eval", lambda: nn.RReLU(), [xa()], True),
    ("RReLU(0.1,0.3) eval", lambda: nn.RReLU(0.1, 0.3), [xa()], True),
    # pools
    ("MaxPool3d(2)", lambda: nn.MaxPool3d(2), [ramp([1, 2, 4, 4, 5], 3, -2.0, 0.37, 1e-3)], False),
    ("MaxPool3d(2,(1,2,1),(1,0,1),(1,1,2),ceil)",
     lambda: nn.MaxPool3d(2, (1, 2, 1), (1, 0, 1), (1, 1, 2), ceil_mode=True),
     [ramp([1, 2, 4, 4, 5], 3, -2.0, 0.37, 1e-3)], False),
    ("AvgPool3d(2)", lambda: nn.AvgPool3d(2), [ramp([1, 2, 4, 4, 5], 3, -2.0, 0.37)], False),
    ("AvgPool3d(3,2,1,ceil,no pad count)",
     lambda: nn.AvgPool3d(3, 2, 1, ceil_mode=True, count_include_pad=False),
     [ramp([1, 2, 4, 4, 5], 3, -2.0, 0.37)], False),
    ("AvgPool3d(2,divisor_override=3)", lambda: nn.AvgPool3d(2, divisor_override=3),
     [ramp([1, 2, 4, 4, 5], 3, -2.0, 0.37)], False),
    ("AdaptiveAvgPool1d(3)", lambda: nn.AdaptiveAvgPool1d(3), [ramp([2, 3, 7], 1)], False),
    ("AdaptiveAvgPool3d((2,3,2))", lambda: nn.AdaptiveAvgPool3d((2, 3, 2)),
     [ramp([1, 2, 5, 4, 3], 2)], False),
    ("AdaptiveAvgPool3d(1) unbatched", lambda: nn.AdaptiveAvgPool3d(1), [ramp([2, 3, 4, 3], 2)],
     False),
    ("AdaptiveMaxPool1d(3)", lambda: nn.AdaptiveMaxPool1d(3), [ramp([2, 3, 7], 1, tie=1e-3)],
     False),
    ("AdaptiveMaxPool2d((2,3))", lambda: nn.AdaptiveMaxPool2d((2, 3)),
     [ramp([2, 2, 5, 7], 1, tie=1e-3)], False),
    ("AdaptiveMaxPool3d((2,2,2))", lambda: nn.AdaptiveMaxPool3d((2, 2, 2)),
     [ramp([1, 2, 4, 5, 3], 6, tie=1e-3)], False),
    ("LPPool1d(2,3)", lambda: nn.LPPool1d(2, 3), [ramp([2, 3, 7], 1)], False),
    ("LPPool2d(2,(2,3),(1,2),ceil)", lambda: nn.LPPool2d(2, (2, 3), (1, 2), ceil_mode=True),
     [ramp([2, 2, 5, 7], 1)], False),
    ("LPPool2d(3,2) positive", lambda: nn.LPPool2d(3, 2), [ramp([1, 2, 4, 4], 1, 0.1, 0.3)],
     False),
    ("LPPool3d(2,2)", lambda: nn.LPPool3d(2, 2), [ramp([1, 2, 4, 4, 5], 3, -2.0, 0.37)], False),
    ("UpsamplingNearest2d(scale 2)", lambda: nn.UpsamplingNearest2d(scale_factor=2),
     [ramp([1, 2, 2, 3], 1)], False),
    ("UpsamplingBilinear2d(size (5,7))", lambda: nn.UpsamplingBilinear2d(size=(5, 7)),
     [ramp([1, 2, 2, 3], 1)], False),
    # layers
    ("PixelShuffle(2)", lambda: nn.PixelShuffle(2), [ramp([1, 8, 2, 3], 1)], False),
    ("PixelUnshuffle(2)", lambda: nn.PixelUnshuffle(2), [ramp([1, 2, 4, 6], 1)], False),
    ("ChannelShuffle(3)", lambda: nn.ChannelShuffle(3), [ramp([2, 6, 2, 2], 1)], False),
    ("Bilinear(3,4,2)", lambda: nn.Bilinear(3, 4, 2), [ramp([5, 3], 1), ramp([5, 4], 2)], False),
    ("Bilinear(3,2,4,bias=False) 3d", lambda: nn.Bilinear(3, 2, 4, bias=False),
     [ramp([2, 3, 3], 1), ramp([2, 3, 2], 2)], False),
    ("LocalResponseNorm(3)", lambda: nn.LocalResponseNorm(3), [ramp([2, 5, 3, 3], 1)], False),
    ("LocalResponseNorm(2,0.01,0.5,2) 3d", lambda: nn.LocalResponseNorm(2, 0.01, 0.5, 2.0),
     [ramp([2, 4, 5], 1)], False),
    ("InstanceNorm3d(2,affine)", instance_norm3d, [ramp([2, 2, 2, 3, 2], 1)], False),
    ("Unfold(2)", lambda: nn.Unfold(2), [ramp([1, 2, 4, 5], 1)], False),
    ("Unfold((2,3),(1,2),1,(2,1))", lambda: nn.Unfold((2, 3), (1, 2), 1, (2, 1)),
     [ramp([2, 2, 5, 6], 1)], False),
    ("Unfold(2,stride=2) unbatched", lambda: nn.Unfold(2, stride=2), [ramp([3, 4, 4], 1)], False),
    ("Fold((4,5),2)", lambda: nn.Fold((4, 5), 2), [ramp([1, 8, 12], 1)], False),
    ("Fold((5,6),(2,3),(1,2),1,(2,1))", lambda: nn.Fold((5, 6), (2, 3), (1, 2), 1, (2, 1)),
     [ramp([2, 12, 12], 1)], False),
    ("Fold((4,4),2,stride=2) unbatched", lambda: nn.Fold((4, 4), 2, stride=2),
     [ramp([12, 4], 1)], False),
]

lines = ["// Generated by tests/nn/torch_nn_references.py (torch %s, CPU, float64): do not edit.\n"
         % torch.__version__]
for seed, (name, make, inputs, eval_mode) in enumerate(inv_cases):
    torch.manual_seed(seed)
    m = make()
    if eval_mode:
        m.eval()
    xs = [t.clone().requires_grad_() for t in inputs]
    out = m(*xs)
    c = det_input(list(out.shape), 5, -1.0, 0.25)
    (out * c).sum().backward()
    lines.append('  {"%s",\n   {\n' % name)
    for pn, p in m.state_dict().items():
        lines.append(cpp_tensor("param:" + pn, p))
    for i, t in enumerate(xs):
        lines.append(cpp_tensor("x" if i == 0 else "x%d" % (i + 1), t))
    lines.append(cpp_tensor("out", out))
    lines.append(cpp_tensor("c", c))
    for i, t in enumerate(xs):
        lines.append(cpp_tensor("grad:x" if i == 0 else "grad:x%d" % (i + 1), t.grad))
    for pn, p in m.named_parameters():
        lines.append(cpp_tensor("grad:" + pn, p.grad))
    lines.append("   }},\n")
# EmbeddingBag: the weight recorded as param:weight; "idx" (and "offsets", "psw") the inputs;
# gradients of sum(out * c) w.r.t. the weight and per_sample_weights.
bag_cases = [
    ("EmbeddingBag sum 2d per_sample_weights", dict(mode="sum"),
     [[0, 2, 4], [5, 2, 1]], None, [[0.5, 1.0, -1.0], [2.0, 0.25, 1.0]]),
    ("EmbeddingBag mean offsets empty bag padding_idx=2", dict(mode="mean", padding_idx=2),
     [1, 2, 3, 2, 2, 0, 5], [0, 2, 2, 5], None),
    ("EmbeddingBag max offsets include_last_offset padding_idx=-1",
     dict(mode="max", include_last_offset=True, padding_idx=-1),
     [1, 3, 0, 4, 5, 5, 2], [0, 2, 3, 5, 7], None),
    ("EmbeddingBag sum offsets padding_idx=0 per_sample_weights",
     dict(mode="sum", padding_idx=0), [0, 3, 1, 0, 4], [0, 3], [1.5, -0.5, 2.0, 3.0, 0.25]),
    ("EmbeddingBag mean 2d max_norm", dict(mode="mean", max_norm=1.5), [[0, 1], [3, 1]], None,
     None),
]
for seed, (name, kw, idx, offs, psw) in enumerate(bag_cases):
    torch.manual_seed(100 + seed)
    m = nn.EmbeddingBag(6, 3, **kw)
    if m.padding_idx is not None:  # a nonzero padding row: left out all the same
        with torch.no_grad():
            m.weight[m.padding_idx] = torch.tensor([0.5, -0.5, 1.0])
    lines.append('  {"%s",\n   {\n' % name)
    lines.append(cpp_tensor("param:weight", m.weight))
    idx_t = torch.tensor(idx)
    offs_t = torch.tensor(offs) if offs is not None else None
    psw_t = torch.tensor(psw).requires_grad_() if psw is not None else None
    out = m(idx_t, offs_t, psw_t)
    c = det_input(list(out.shape), 5, -1.0, 0.25)
    (out * c).sum().backward()
    lines.append(cpp_tensor("idx", idx_t.double()))
    if offs_t is not None:
        lines.append(cpp_tensor("offsets", offs_t.double()))
    if psw_t is not None:
        lines.append(cpp_tensor("psw", psw_t))
        lines.append(cpp_tensor("grad:psw", psw_t.grad))
    lines.append(cpp_tensor("out", out))
    lines.append(cpp_tensor("c", c))
    lines.append(cpp_tensor("grad:weight", m.weight.grad))
    lines.append("   }},\n")
# MaxUnpool: the pooled values "x" and their "indices" from MaxPoolNd(return_indices=True) of a
# tie-free input; "out" = unpool(x, indices[, output_size]), gradient of sum(out * c) w.r.t. x.
unpool_cases = [
    ("MaxUnpool1d(2)", nn.MaxPool1d(2, return_indices=True), nn.MaxUnpool1d(2), [1, 2, 6], None),
    ("MaxUnpool2d(2)", nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2), [1, 2, 4, 4],
     None),
    ("MaxUnpool2d(3,2,1) output_size (5,5)", nn.MaxPool2d(3, 2, 1, return_indices=True),
     nn.MaxUnpool2d(3, 2, 1), [1, 1, 5, 5], [5, 5]),
    ("MaxUnpool2d(2) unbatched", nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2),
     [2, 4, 4], None),
    ("MaxUnpool3d(2)", nn.MaxPool3d(2, return_indices=True), nn.MaxUnpool3d(2), [1, 1, 4, 4, 2],
     None),
]
for name, pool, unpool, shape, size in unpool_cases:
    vals, ind = pool(ramp(shape, 3, -2.0, 0.37, 1e-3))
    vals = vals.detach().requires_grad_()
    out = unpool(vals, ind, output_size=size)
    c = det_input(list(out.shape), 5, -1.0, 0.25)
    (out * c).sum().backward()
    lines.append('  {"%s",\n   {\n' % name)
    lines.append(cpp_tensor("x", vals))
    lines.append(cpp_tensor("indices", ind.double()))
    lines.append(cpp_tensor("out", out))
    lines.append(cpp_tensor("c", c))
    lines.append(cpp_tensor("grad:x", vals.grad))
    lines.append("   }},\n")
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "inventory_references.inc"),
          "w") as f:
    f.writelines(lines)
print("wrote inventory_references.inc:", len(inv_cases), "cases")
