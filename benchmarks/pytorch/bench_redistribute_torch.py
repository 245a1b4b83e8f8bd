#!/usr/bin/env python3
"""benchmarks/redistribute/bench_redistribute.cc under PyTorch DTensor (gloo): the same
transitions (1-D mesh of the world; at 4 ranks also the 2x2 mesh cases), global [rows, 256]
float32 of value (i % 13) - 6 at linear index i, sizes geometric from --min-bytes to --max-bytes,
iterations from a time budget (one timed DTensor run) or --iters. Each iteration: a barrier, then
DTensor.redistribute (its result materialised), then the raw gloo collective that implements it
on preallocated buffers (the baseline, where gloo has one), interleaved; the time is the max over
ranks, median over iterations. The result is checked once per size against the expected shard.

    torchrun --standalone --nproc-per-node 4 bench_redistribute_torch.py --json FILE
"""
import argparse
import sys

import torch
import torch.distributed as dist
from torch.distributed.tensor import (DTensor, Partial, Replicate, Shard, distribute_tensor,
                                      init_device_mesh)

import torch_common as tc

COLS = 256


def make_global(rows, scale):
    i = torch.arange(rows * COLS, dtype=torch.int64)
    return ((i % 13) - 6).to(torch.float32).mul_(scale).reshape(rows, COLS)


def partial_factor(placements, mesh):
    f = 1
    for d, p in enumerate(placements):
        if p.is_partial():
            f *= mesh.size(d)
    return f


def make_source(x, mesh, src):
    """Every rank builds the same global x and takes its chunk locally; Partial(sum) dims give
    each rank the value x, so the logical value is x * size (as ours)."""
    no_partial = [Replicate() if p.is_partial() else p for p in src]
    local = distribute_tensor(x, mesh, no_partial, src_data_rank=None).to_local()
    return DTensor.from_local(local, mesh, src, run_check=False, shape=x.shape, stride=x.stride())


def materialise(t):
    """The local result, waited for (functional collectives may hand back an async wrapper)."""
    local = t.to_local()
    return local.wait() if hasattr(local, "wait") else local


def raw_fn(kind, group, n, numel):
    """(name, fn) of the gloo collective on preallocated buffers, or ("-", None)."""
    local = numel // n
    if kind == "allgather":
        inp, out = torch.ones(local), torch.zeros(numel)
        return "gloo all_gather_into_tensor", lambda: dist.all_gather_into_tensor(out, inp, group)
    if kind == "allreduce":
        buf = torch.ones(numel)
        return "gloo all_reduce", lambda: dist.all_reduce(buf, group=group)
    if kind == "reduce_scatter":
        inp, out = torch.ones(numel), torch.zeros(local)
        return "gloo reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(out, inp,
                                                                               group=group)
    if kind == "alltoall":
        inp, out = torch.ones(local), torch.zeros(local)
        return "gloo all_to_all_single", lambda: dist.all_to_all_single(out, inp, group=group)
    return "-", None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=4096)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--max-iters", type=int, default=50)
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--only", default="", help="comma-separated transition names")
    args = tc.init(ap)
    world = tc.world()
    mesh1 = init_device_mesh("cpu", (world,), mesh_dim_names=("x",))
    S, R, P = Shard, Replicate, Partial
    # name, src, dst, mesh, raw collective, mesh dim of its group (-1: the world)
    cases = [
        ("S(0)->R", [S(0)], [R()], mesh1, "allgather", 0),
        ("S(1)->R", [S(1)], [R()], mesh1, "allgather", 0),
        ("P->R", [P()], [R()], mesh1, "allreduce", 0),
        ("P->S(0)", [P()], [S(0)], mesh1, "reduce_scatter", 0),
        ("S(0)->S(1)", [S(0)], [S(1)], mesh1, "alltoall", 0),
        ("R->S(0)", [R()], [S(0)], mesh1, None, 0),
    ]
    if world == 4:
        mesh2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        cases += [
            ("2d [S(0),R]->[R,R]", [S(0), R()], [R(), R()], mesh2, "allgather", 0),
            ("2d [R,P]->[R,R]", [R(), P()], [R(), R()], mesh2, "allreduce", 1),
            ("2d [S(0),S(1)]->[R,R]", [S(0), S(1)], [R(), R()], mesh2, "allgather", -1),
            ("2d [P,P]->[R,R]", [P(), P()], [R(), R()], mesh2, "allreduce", -1),
            ("2d [S(0),S(0)]->[S(1),S(1)]", [S(0), S(0)], [S(1), S(1)], mesh2, "alltoall", -1),
        ]
    if args.only:
        keep = args.only.split(",")
        cases = [c for c in cases if c[0] in keep]
    out = tc.JsonLines("bench_redistribute_torch", args.json)
    tc.print0(f"# bench_redistribute_torch: {world} ranks, PyTorch {torch.__version__} DTensor "
              f"(gloo), float32, global [rows, {COLS}]; median of the per-iteration max over ranks")
    tc.print0(f"{'transition':28s} {'bytes':>10s} {'iters':>6s} {'dt_us':>11s} {'raw_us':>11s} "
              f"{'check':>5s}")
    all_ok = True
    for name, src, dst, mesh, raw, raw_dim in cases:
        group = dist.group.WORLD if raw_dim < 0 else mesh.get_group(raw_dim)
        n = dist.get_world_size(group)
        nbytes = args.min_bytes
        while nbytes <= args.max_bytes:
            numel = nbytes // 4
            rows = numel // COLS
            if rows < mesh.size():
                nbytes *= args.factor
                continue
            x = make_global(rows, 1.0)
            s = make_source(x, mesh, src)
            got = materialise(s.redistribute(mesh, dst))
            scale = partial_factor(src, mesh) / partial_factor(dst, mesh)
            want = distribute_tensor(make_global(rows, scale), mesh, dst,
                                     src_data_rank=None).to_local()
            ok = torch.equal(got, want)
            all_ok = all_ok and ok

            def dt_fn():
                materialise(s.redistribute(mesh, dst))

            iters = args.iters if args.iters > 0 else tc.iters_for_budget(
                dt_fn, args.budget, 5, args.max_iters)
            baseline, fn = raw_fn(raw, group, n, numel)
            if fn is not None:
                try:
                    fn()
                except (RuntimeError, ValueError):  # the collective is missing from gloo
                    baseline, fn = f"{baseline} (not in gloo)", None
            st = tc.time_interleaved([dt_fn] + ([fn] if fn else []), args.warmup, iters)
            raw_us = st[1][0] * 1e6 if fn else 0.0
            tc.print0(f"{name:28s} {nbytes:10d} {iters:6d} {st[0][0] * 1e6:11.1f} "
                      f"{raw_us:11.1f} {'ok' if ok else 'FAIL':>5s}")
            rec = out.record(name)
            rec.update(ranks=world, mesh=str(mesh.shape), src=str(src), dst=str(dst),
                       bytes=nbytes, iters=iters)
            tc.add_stats(rec, "", st[0])
            rec.update(baseline=baseline, correct=ok)
            if fn:
                tc.add_stats(rec, "baseline", st[1])
                rec["ratio_vs_baseline"] = st[1][0] / st[0][0]
            out.write(rec)
            nbytes *= args.factor
    tc.print0(f"# correctness: {'all ok' if all_ok else 'FAILURES (see check column)'}")
    return tc.finish(all_ok)


if __name__ == "__main__":
    sys.exit(main())
