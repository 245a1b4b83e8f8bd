#!/usr/bin/env python3
"""benchmarks/train/bench_train.cc under PyTorch DTensor (gloo): one training step (forward,
backward, SGD lr 1e-3) of a stack of residual MLP blocks x + fc2(silu(fc1(x))) (biases, hidden
4 * dim, float32), loss = sum(y * w) / numel, parallelized with PyTorch's plan (fc1
ColwiseParallel, fc2 RowwiseParallel, parallelize_module) and trained with torch.optim.SGD, vs
the same model on one device (rank 0 alone) vs a hand-written step on the same weight shards
(F.linear, one dist.all_reduce per block forward and one backward, gradients written out by
hand, SGD in place). Interleaved in a shuffled order, barrier before each, max over ranks,
median over steps; after the run the hand-written weights must equal the DTensor model's.

    torchrun --standalone --nproc-per-node N bench_train_torch.py --json FILE
"""
import argparse
import copy
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import init_device_mesh
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

import torch_common as tc

LR = 1e-3


class MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.silu(self.fc1(x)))


class Stack(nn.Module):
    def __init__(self, layers, dim, hidden):
        super().__init__()
        self.blocks = nn.ModuleList(MLP(dim, hidden) for _ in range(layers))

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        return x


class HandStack:
    """This rank's shards: fc1 rows and bias, fc2 columns and the full fc2 bias."""

    def __init__(self, model):
        local = lambda p: (p.to_local() if hasattr(p, "to_local") else p).detach().clone()  # noqa
        self.blocks = [{k: local(getattr(getattr(b, f), w)) for k, (f, w) in
                        {"w1": ("fc1", "weight"), "b1": ("fc1", "bias"),
                         "w2": ("fc2", "weight"), "b2": ("fc2", "bias")}.items()}
                       for b in model.blocks]

    @staticmethod
    def all_reduce(t):
        if tc.world() > 1:
            dist.all_reduce(t)
        return t

    def step(self, x0, w):
        x = x0
        for b in self.blocks:
            b["x"], b["h"] = x, F.linear(x, b["w1"], b["b1"])
            p = self.all_reduce(F.linear(F.silu(b["h"]), b["w2"]))
            x = x + p + b["b2"]
        g = w * (1.0 / x.numel())
        for b in reversed(self.blocks):
            s = torch.sigmoid(b["h"])
            a = b["h"] * s
            ga = g @ b["w2"]
            gw2, gb2 = g.t() @ a, g.sum(0)
            gh = ga * (s + b["h"] * (s - s * s))  # silu'(h) = s (1 + h (1 - s))
            gw1, gb1 = gh.t() @ b["x"], gh.sum(0)
            g = g + self.all_reduce(gh @ b["w1"])
            for name, grad in (("w1", gw1), ("b1", gb1), ("w2", gw2), ("b2", gb2)):
                b[name].sub_(grad * LR)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=0)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    args = tc.init(ap)
    world, dim = tc.world(), args.dim
    hidden = args.hidden if args.hidden > 0 else 4 * dim
    torch.manual_seed(7)  # the same full weights on every rank
    single = Stack(args.layers, dim, hidden)
    tp = copy.deepcopy(single)
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    parallelize_module(tp, mesh, {"blocks.*.fc1": ColwiseParallel(),
                                  "blocks.*.fc2": RowwiseParallel()})
    opt = torch.optim.SGD(tp.parameters(), lr=LR)
    opt_single = torch.optim.SGD(single.parameters(), lr=LR)
    hand = HandStack(tp)
    g = torch.Generator().manual_seed(11)
    x, w = torch.randn(args.tokens, dim, generator=g), torch.randn(args.tokens, dim, generator=g)

    def step(model, o):
        o.zero_grad()
        loss = (model(x) * w).sum() / x.numel()
        loss.backward()
        o.step()

    root = tc.rank() == 0
    hand_step = torch.no_grad()(hand.step)
    st = tc.time_interleaved([lambda: step(single, opt_single) if root else None,
                              lambda: step(tp, opt),
                              lambda: hand_step(x, w)],
                             args.warmup, args.iters, shuffled=True)
    diff = 0.0
    with torch.no_grad():
        for b, hb in zip(tp.blocks, hand.blocks):
            for p, mine in ((b.fc1.weight, hb["w1"]), (b.fc2.weight, hb["w2"])):
                diff = max(diff, (p.to_local() - mine).abs().max().item())
    d = torch.tensor([diff], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(d, op=dist.ReduceOp.MAX)
    diff = d.item()
    tc.print0(f"# bench_train_torch: PyTorch {torch.__version__} DTensor (gloo), {args.layers} "
              f"residual MLP blocks (dim {dim}, hidden {hidden}, silu), {args.tokens} tokens, "
              f"float32, SGD; {world} rank(s); median of {args.iters} steps (max over ranks)")
    for name, s in zip(("single-device", "dtensor", "hand-written"), st):
        tc.print0(f"{name:14s} {s[0] * 1e3:10.2f} {s[1] * 1e3:10.2f} {s[2] * 1e3:10.2f}")
    ratio = st[1][0] / st[2][0]
    tc.print0(f"dtensor / hand-written: {ratio:.3f}; weights max |diff| {diff:.3g}")
    out = tc.JsonLines("bench_train_torch", args.json)
    rec = out.record("train_step")
    rec.update(ranks=world, dim=dim, hidden=hidden, layers=args.layers, tokens=args.tokens)
    tc.add_stats(rec, "", st[1])
    tc.add_stats(rec, "single", st[0])
    rec["baseline"] = "hand-written step (F.linear + gloo all_reduce)"
    tc.add_stats(rec, "baseline", st[2])
    rec.update(ratio_vs_baseline=ratio, max_weight_diff=diff)
    out.write(rec)
    return tc.finish(diff < 1e-3)


if __name__ == "__main__":
    sys.exit(main())
