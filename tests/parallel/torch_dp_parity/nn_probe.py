"""PyTorch half of the nn-module side-by-side probe (round 6): one process, float64.
Run: /root/venv/bin/python nn_probe.py  -> torch_nn.json; nn_probe.cc (one process) writes
dt_nn.json; python3 compare.py nn prints the differences. Each case: the module's parameter and
buffer names and shapes (state_dict keys), then for each forward in its mode sequence ('t' train,
'e' eval) the output, and after the last one the gradients of sum(out * c) for the input and the
parameters, and the buffers. Parameters are set to 0.3 sin(0.37 i + 1.1 k + 0.2) (k-th parameter).
"""
import json, math, torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)
out = []


def det(shape, salt=0, lo=-2.5, step=0.5):
    n = math.prod(shape)
    return torch.tensor([lo + step * ((i * 7 + salt) % 11) for i in range(n)]).reshape(shape)


def rec(name, t):
    out.append(dict(case=name, placements=["local"], lshape=list(t.shape),
                    local=[float(v) for v in t.double().flatten().tolist()], gshape=list(t.shape)))


def case(name, m, shape, modes="t", salt=1, lo=-2.5, step=0.5):
    try:
        out.append(dict(case=name + " keys", value=" ".join(
            "%s%s" % (k, list(v.shape)) for k, v in m.state_dict().items())))
        with torch.no_grad():
            for k, (n, p) in enumerate(m.named_parameters()):
                p.copy_(torch.tensor([0.3 * math.sin(0.37 * i + 1.1 * k + 0.2)
                                      for i in range(p.numel())]).reshape(p.shape))
        for i, mode in enumerate(modes):
            m.train(mode == "t")
            x = det(shape, salt + i, lo, step).requires_grad_()
            y = m(x)
            rec("%s fwd%d %s" % (name, i, mode), y)
        (y * det(list(y.shape), 5, -1.0, 0.25)).sum().backward()
        rec(name + " dx", x.grad)
        for n, p in m.named_parameters():
            rec(name + " d" + n, p.grad)
        for n, b in m.named_buffers():
            rec(name + " buf " + n, b)
    except Exception as e:
        out.append(dict(case=name, error=type(e).__name__ + ": " + str(e)[:150]))


def loss_case(name, m, shape, target):
    try:
        x = det(shape, 2, -1.0, 0.2).requires_grad_()
        y = m(x, target)
        rec(name + " fwd", y)
        (y * det(list(y.shape), 5, -1.0, 0.25)).sum().backward()
        rec(name + " dx", x.grad)
    except Exception as e:
        out.append(dict(case=name, error=type(e).__name__ + ": " + str(e)[:150]))


# Norms: defaults and options, train then eval (running statistics).
case("LayerNorm", nn.LayerNorm(4), [3, 4])
case("LayerNorm noaffine", nn.LayerNorm(4, elementwise_affine=False), [3, 4])
case("LayerNorm eps", nn.LayerNorm(4, eps=0.5), [3, 4])
case("RMSNorm", nn.RMSNorm(4), [3, 4])
case("RMSNorm eps", nn.RMSNorm(4, eps=0.5), [3, 4])
case("LayerNorm nobias", nn.LayerNorm(4, bias=False), [3, 4])
case("RMSNorm noaffine", nn.RMSNorm(4, elementwise_affine=False), [3, 4])
case("BatchNorm1d", nn.BatchNorm1d(3), [5, 3], "ttte")
case("BatchNorm1d 3d", nn.BatchNorm1d(3), [2, 3, 4], "tte")
case("BatchNorm1d mom None", nn.BatchNorm1d(3, momentum=None), [5, 3], "ttte")
case("BatchNorm1d noaffine", nn.BatchNorm1d(3, affine=False), [5, 3], "tte")
case("BatchNorm1d nostats", nn.BatchNorm1d(3, track_running_stats=False), [5, 3], "tte")
case("BatchNorm2d", nn.BatchNorm2d(2, eps=0.1, momentum=0.3), [2, 2, 3, 2], "tte")
case("GroupNorm", nn.GroupNorm(2, 4), [2, 4, 3], "t")
case("GroupNorm noaffine", nn.GroupNorm(2, 4, affine=False), [2, 4, 3], "t")
case("GroupNorm 4d", nn.GroupNorm(1, 2, eps=0.2), [2, 2, 2, 3], "t")
case("InstanceNorm1d", nn.InstanceNorm1d(3), [2, 3, 4], "te")
case("InstanceNorm1d affine stats", nn.InstanceNorm1d(3, affine=True, track_running_stats=True), [2, 3, 4], "tte")
case("InstanceNorm2d stats", nn.InstanceNorm2d(2, momentum=0.5, track_running_stats=True), [2, 2, 3, 2], "tte")
case("InstanceNorm1d momentum None", nn.InstanceNorm1d(3, momentum=None, affine=True, track_running_stats=True), [2, 3, 4], "tte")
case("InstanceNorm1d unbatched", nn.InstanceNorm1d(3, affine=True), [3, 4], "t")
# Linear / Embedding-free layers
case("Linear", nn.Linear(4, 3), [2, 4])
case("Linear nobias", nn.Linear(4, 3, bias=False), [2, 4])
case("Linear 3d", nn.Linear(4, 2), [2, 3, 4])
# Convolutions
case("Conv1d", nn.Conv1d(2, 3, 3), [2, 2, 6])
case("Conv1d s2 p1 d2 g", nn.Conv1d(4, 2, 3, stride=2, padding=1, dilation=2, groups=2), [1, 4, 9])
case("Conv1d nobias unbatched", nn.Conv1d(2, 2, 2, bias=False), [2, 5])
case("Conv2d", nn.Conv2d(2, 2, (2, 3), stride=(2, 1), padding=(1, 0)), [1, 2, 5, 5])
case("Conv2d groups dil", nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=4), [1, 4, 4, 4])
case("Conv3d", nn.Conv3d(1, 2, 2, stride=1, padding=1), [1, 1, 2, 3, 2])
case("Conv1d same asym", nn.Conv1d(2, 2, 4, padding="same"), [2, 2, 6])
case("Conv2d same dil reflect", nn.Conv2d(2, 2, (2, 3), padding="same", dilation=(1, 2), padding_mode="reflect"), [1, 2, 4, 5])
case("Conv1d replicate unbatched", nn.Conv1d(2, 2, 3, padding=2, padding_mode="replicate"), [2, 5])
case("Conv2d circular s2", nn.Conv2d(2, 2, 3, stride=2, padding=(1, 2), padding_mode="circular"), [1, 2, 4, 4])
case("Conv3d valid", nn.Conv3d(1, 2, 2, padding="valid"), [1, 1, 2, 3, 2])
case("Conv3d same circular", nn.Conv3d(1, 1, 2, padding="same", padding_mode="circular"), [1, 1, 2, 3, 2])
case("ConvTranspose1d", nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1), [1, 2, 4])
case("ConvTranspose2d g d", nn.ConvTranspose2d(4, 2, 2, stride=2, groups=2, dilation=2), [1, 4, 3, 3])
case("ConvTranspose3d", nn.ConvTranspose3d(1, 1, 2, bias=False), [1, 1, 2, 2, 2])
# Pools
case("MaxPool1d", nn.MaxPool1d(2), [1, 2, 7])
case("MaxPool1d ceil pad dil", nn.MaxPool1d(3, 2, 1, 2, ceil_mode=True), [1, 1, 9])
case("MaxPool2d", nn.MaxPool2d((2, 3), stride=(1, 2), padding=(1, 1)), [1, 1, 4, 5])
case("MaxPool2d ceil", nn.MaxPool2d(2, ceil_mode=True), [1, 2, 5, 5])
case("AvgPool1d", nn.AvgPool1d(3, 2, 1), [1, 2, 7])
case("AvgPool1d nocount ceil", nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False), [1, 2, 8])
case("AvgPool2d", nn.AvgPool2d(2), [1, 1, 4, 5])
case("AvgPool2d pad nocount", nn.AvgPool2d(3, 2, 1, count_include_pad=False), [1, 1, 5, 5])
case("AvgPool2d divisor", nn.AvgPool2d(2, 1, divisor_override=3), [1, 1, 3, 3])
case("AvgPool2d ceil", nn.AvgPool2d(2, ceil_mode=True), [1, 1, 5, 5])
case("AdaptiveAvgPool2d", nn.AdaptiveAvgPool2d((2, 3)), [1, 2, 5, 4])
case("AdaptiveAvgPool2d 1", nn.AdaptiveAvgPool2d(1), [2, 2, 3, 3])
case("Upsample nearest", nn.Upsample(scale_factor=2), [1, 1, 2, 3])
case("Upsample bilinear", nn.Upsample(size=(3, 5), mode="bilinear"), [1, 1, 2, 3])
case("Upsample bilinear ac", nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), [1, 1, 2, 3])
case("Upsample nearest 1d size", nn.Upsample(size=5), [1, 2, 3])
case("Upsample nearest-exact", nn.Upsample(scale_factor=1.5, mode="nearest-exact"), [1, 1, 2, 4])
case("Upsample linear", nn.Upsample(scale_factor=2.5, mode="linear"), [1, 2, 3])
case("Upsample bicubic", nn.Upsample(size=(4, 5), mode="bicubic"), [1, 1, 3, 3])
case("Upsample bicubic ac", nn.Upsample(scale_factor=2, mode="bicubic", align_corners=True), [1, 1, 2, 3])
case("Upsample trilinear", nn.Upsample(scale_factor=2, mode="trilinear"), [1, 1, 2, 2, 2])
case("Upsample nearest 3d", nn.Upsample(scale_factor=(1, 2, 3)), [1, 1, 2, 2, 2])
case("MaxPool2d unbatched", nn.MaxPool2d(2), [2, 4, 4])
case("AvgPool1d unbatched", nn.AvgPool1d(2), [2, 6])
case("AdaptiveAvgPool2d unbatched", nn.AdaptiveAvgPool2d((3, 2)), [2, 5, 4])
case("GroupNorm 2d", nn.GroupNorm(2, 4), [3, 4])
case("BatchNorm2d eval first", nn.BatchNorm2d(2), [2, 2, 2, 2], "et")
# Activations with options
case("Softplus", nn.Softplus(2.0, 1.5), [3, 4], salt=2)
case("ELU", nn.ELU(0.7), [3, 4], salt=2)
case("CELU", nn.CELU(1.7), [3, 4], salt=2)
case("LeakyReLU", nn.LeakyReLU(0.2), [3, 4], salt=2)
case("ReLU6", nn.ReLU6(), [3, 4], salt=2, lo=-4, step=1.3)
case("GLU", nn.GLU(), [3, 4], salt=2)
case("GLU 0", nn.GLU(0), [4, 3], salt=2)
case("Softmin", nn.Softmin(1), [3, 4], salt=2)
case("GELU tanh", nn.GELU("tanh"), [3, 4], salt=2)
case("Dropout eval", nn.Dropout(0.3), [3, 4], "e")
case("Flatten", nn.Flatten(), [2, 3, 2])
# Losses: every reduction and option
tgt = det([3, 4], 4, -0.5, 0.3)
prob = torch.sigmoid(det([3, 4], 4, -0.5, 0.3))
cls = torch.tensor([1, 0, 3])
for red in ("mean", "sum", "none"):
    loss_case("MSELoss " + red, nn.MSELoss(reduction=red), [3, 4], tgt)
    loss_case("L1Loss " + red, nn.L1Loss(reduction=red), [3, 4], tgt)
    loss_case("SmoothL1Loss b0.5 " + red, nn.SmoothL1Loss(reduction=red, beta=0.5), [3, 4], tgt)
    loss_case("HuberLoss d0.7 " + red, nn.HuberLoss(reduction=red, delta=0.7), [3, 4], tgt)
    loss_case("BCEWithLogitsLoss " + red, nn.BCEWithLogitsLoss(reduction=red), [3, 4], prob)
    loss_case("BCEWithLogitsLoss posw " + red, nn.BCEWithLogitsLoss(reduction=red, pos_weight=torch.tensor([1.0, 2.0, 0.5, 3.0])), [3, 4], prob)
    loss_case("CrossEntropyLoss " + red, nn.CrossEntropyLoss(reduction=red), [3, 4], cls)
    loss_case("CrossEntropyLoss ls w ign " + red, nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.5]), ignore_index=0, reduction=red, label_smoothing=0.2), [3, 4], cls)
    loss_case("NLLLoss w " + red, nn.NLLLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.5]), reduction=red), [3, 4], cls)
for red in ("mean", "sum", "batchmean"):
    loss_case("KLDivLoss " + red, nn.KLDivLoss(reduction=red), [3, 4], prob)
    loss_case("KLDivLoss logt " + red, nn.KLDivLoss(reduction=red, log_target=True), [3, 4], tgt)
bce_w = torch.tensor([1.0, 2.0, 0.5, 3.0])
for red in ("mean", "sum", "none"):  # BCELoss takes probabilities: the input goes through sigmoid
    loss_case("BCELoss w sigmoid " + red,
              lambda a, b, m=nn.BCELoss(weight=bce_w, reduction=red): m(torch.sigmoid(a), b),
              [3, 4], prob)
loss_case("CosineSimilarity", nn.CosineSimilarity(1), [3, 4], tgt)
loss_case("CosineSimilarity 0 eps", nn.CosineSimilarity(0, eps=0.5), [3, 4], tgt * 0.01)
loss_case("PairwiseDistance", nn.PairwiseDistance(), [3, 4], tgt)
loss_case("PairwiseDistance p1 keep", nn.PairwiseDistance(1.0, 0.1, True), [3, 4], tgt)
json.dump(out, open("torch_nn.json", "w"))
print(len(out), [e for e in out if "error" in e])
