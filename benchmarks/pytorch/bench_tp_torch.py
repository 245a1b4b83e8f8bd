#!/usr/bin/env python3
"""benchmarks/transformer/bench_tp.cc under PyTorch DTensor (gloo): the tensor-parallel
transformer block forward (RMSNorm eps 1e-5, causal multi-head attention without biases,
SwiGLU with hidden 4 * dim, float32) parallelized with PyTorch's Megatron plan
(parallelize_module: ColwiseParallel on wq/wk/wv/w1/w3, RowwiseParallel on wo/w2, the layers'
default input/output layouts, so attention runs on each rank's local heads as in PyTorch's
tensor-parallel tutorial), vs the single-device block (rank 0 alone) vs a hand-written version
of the same math on the same weight shards (F.linear + dist.all_reduce after wo and w2). The
variants are timed interleaved in a shuffled order, barrier before each, max over ranks, median
over iterations; outputs checked against each other (max |difference| <= 1e-3).

    torchrun --standalone --nproc-per-node N bench_tp_torch.py --json FILE
"""
import argparse
import copy
import math
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import init_device_mesh
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

import torch_common as tc


def attention_core(q, k, v, head_dim, mask):
    """softmax(q k^T / sqrt(head_dim) + mask) v on [B, S, W] inputs, heads from the last dim
    (W / head_dim of them: the local heads when q, k, v are column shards)."""
    b, s, w = q.shape
    heads = lambda t: t.reshape(b, s, w // head_dim, head_dim).transpose(1, 2)  # noqa: E731
    scores = torch.matmul(heads(q), heads(k).transpose(2, 3)) * (1.0 / math.sqrt(head_dim))
    o = torch.matmul(torch.softmax(scores + mask, dim=-1), heads(v))
    return o.transpose(1, 2).reshape(b, s, w)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, mask):
        super().__init__()
        self.head_dim, self.mask = dim // n_heads, mask
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x):
        o = attention_core(self.wq(x), self.wk(x), self.wv(x), self.head_dim, self.mask)
        return self.wo(o)


class SwiGLU(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    """h = x + attention(attention_norm(x)); out = h + mlp(mlp_norm(h))."""

    def __init__(self, dim, n_heads, hidden, mask):
        super().__init__()
        self.attention_norm = nn.RMSNorm(dim, eps=1e-5)
        self.attention = Attention(dim, n_heads, mask)
        self.mlp_norm = nn.RMSNorm(dim, eps=1e-5)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.mlp(self.mlp_norm(h))


class HandBlock:
    """The same math on this rank's shards, one dist.all_reduce after wo and one after w2."""

    def __init__(self, block, head_dim, mask):
        local = lambda p: p.to_local() if hasattr(p, "to_local") else p  # noqa: E731
        self.p = {n: local(p.detach()).contiguous() for n, p in block.named_parameters()}
        self.head_dim, self.mask = head_dim, mask

    def all_reduce(self, t):
        if tc.world() > 1:
            dist.all_reduce(t)
        return t

    def forward(self, x):
        p, d = self.p, x.shape[-1]
        a = F.rms_norm(x, (d,), p["attention_norm.weight"], 1e-5)
        q, k, v = (F.linear(a, p[f"attention.{w}.weight"]) for w in ("wq", "wk", "wv"))
        o = F.linear(attention_core(q, k, v, self.head_dim, self.mask), p["attention.wo.weight"])
        h = x + self.all_reduce(o)
        g = F.rms_norm(h, (d,), p["mlp_norm.weight"], 1e-5)
        m = F.linear(F.silu(F.linear(g, p["mlp.w1.weight"])) * F.linear(g, p["mlp.w3.weight"]),
                     p["mlp.w2.weight"])
        return h + self.all_reduce(m)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=0)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=2)
    args = tc.init(ap)
    world, dim = tc.world(), args.dim
    hidden = args.hidden if args.hidden > 0 else 4 * dim
    mask = torch.full((args.seq, args.seq), float("-inf")).triu(1)
    torch.manual_seed(1234)  # the same full weights on every rank
    ref = Block(dim, args.heads, hidden, mask)
    block = copy.deepcopy(ref)
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    plan = {n: ColwiseParallel() for n in ("attention.wq", "attention.wk", "attention.wv",
                                          "mlp.w1", "mlp.w3")}
    plan.update({n: RowwiseParallel() for n in ("attention.wo", "mlp.w2")})
    parallelize_module(block, mesh, plan)
    hand = HandBlock(block, dim // args.heads, mask)
    x = torch.randn(args.batch, args.seq, dim, generator=torch.Generator().manual_seed(7))

    with torch.no_grad():
        y_ref, y_dt, y_hand = ref(x), block(x), hand.forward(x)
        diff = torch.tensor([(y_dt - y_hand).abs().max().item(),
                             (y_dt - y_ref).abs().max().item()], dtype=torch.float64)
        if world > 1:
            dist.all_reduce(diff, op=dist.ReduceOp.MAX)
        root = tc.rank() == 0
        st = tc.time_interleaved([lambda: ref(x) if root else None, lambda: block(x),
                                  lambda: hand.forward(x)], args.warmup, args.iters,
                                 shuffled=True)
    t_single, t_dt, t_hand = st
    tc.print0(f"# bench_tp_torch: PyTorch {torch.__version__} DTensor (gloo), TransformerBlock "
              f"forward, float32, dim={dim} heads={args.heads} hidden={hidden} seq={args.seq} "
              f"batch={args.batch}; median of {args.iters} (max over ranks)")
    tc.print0(f"{'ranks':6s} {'single_ms':>10s} {'dtensor_ms':>11s} {'hand_ms':>9s} "
              f"{'dtensor/hand':>13s} {'|dt-hand|':>10s} {'|dt-single|':>11s}")
    tc.print0(f"{world:<6d} {t_single[0] * 1e3:10.3f} {t_dt[0] * 1e3:11.3f} "
              f"{t_hand[0] * 1e3:9.3f} {t_dt[0] / t_hand[0]:13.3f} {diff[0].item():10.3g} "
              f"{diff[1].item():11.3g}")
    out = tc.JsonLines("bench_tp_torch", args.json)
    rec = out.record("tp_block_forward")
    rec.update(ranks=world, dim=dim, heads=args.heads, seq=args.seq, batch=args.batch,
               iters=args.iters)
    tc.add_stats(rec, "", t_dt)
    rec["baseline"] = "hand-written (F.linear + gloo all_reduce)"
    tc.add_stats(rec, "baseline", t_hand)
    rec["ratio_vs_baseline"] = t_dt[0] / t_hand[0]
    tc.add_stats(rec, "single", t_single)
    rec.update(speedup_vs_single=t_single[0] / t_dt[0], max_abs_diff_vs_hand=diff[0].item(),
               max_abs_diff_vs_single=diff[1].item())
    out.write(rec)
    return tc.finish(diff[0].item() <= 1e-3 and diff[1].item() <= 1e-3)


if __name__ == "__main__":
    sys.exit(main())
