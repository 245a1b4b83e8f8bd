#!/usr/bin/env python3
"""benchmarks/dispatch/bench_dispatch.cc under PyTorch DTensor (gloo): per-op dispatch overhead
on [8, 8] float32 on a mesh of the world (run with one rank, as ours), the op on DTensors
(sharding cached) vs the same op on the local tensors, the cost of a cache miss, and the cost of
autograd recording. Same ops, placements, timing (per-call median over batches of --batch calls,
at least 15 batches and --min-seconds) and JSON fields as ours; bench = bench_dispatch_torch.

    torchrun --standalone --nproc-per-node 1 bench_dispatch_torch.py --json FILE
"""
import argparse
import sys

import torch
import torch.distributed.tensor._redistribute as redistribute_mod
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor, init_device_mesh

import torch_common as tc


def clear_sharding_caches():
    """PyTorch keeps two caches of sharding propagation: a C++ one on the fast path and a
    Python LRU behind it. Both are private; cleared here only for the cache-miss figure."""
    torch._C._clear_DTensor_sharding_propagator_cache()
    DTensor._op_dispatcher.sharding_propagator.propagate_op_sharding.cache_clear()


def clear_plan_cache():
    redistribute_mod._gen_transform_infos.cache_clear()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--min-seconds", type=float, default=0.2)
    args = tc.init(ap)
    mesh = init_device_mesh("cpu", (tc.world(),), mesh_dim_names=("x",))
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)
    da = distribute_tensor(a, mesh, [Shard(0)], src_data_rank=None)
    db = distribute_tensor(b, mesh, [Shard(0)], src_data_rank=None)
    dr = distribute_tensor(b, mesh, [Replicate()], src_data_rank=None)
    la, lb, lr = da.to_local(), db.to_local(), dr.to_local()
    ops = [
        ("add(S(0), S(0))", lambda: torch.add(da, db).to_local(), lambda: torch.add(la, lb)),
        ("mul(S(0), 0.5)", lambda: torch.mul(da, 0.5).to_local(), lambda: torch.mul(la, 0.5)),
        ("mm(S(0), R)", lambda: torch.mm(da, dr).to_local(), lambda: torch.mm(la, lr)),
        ("sum(S(0), dim=1)", lambda: torch.sum(da, dim=1).to_local(),
         lambda: torch.sum(la, dim=1)),
        ("transpose(S(0), 0, 1)", lambda: torch.transpose(da, 0, 1).to_local(),
         lambda: torch.transpose(la, 0, 1)),
        ("view(R, [4, 16])", lambda: dr.view(4, 16).to_local(), lambda: lr.view(4, 16)),
        ("softmax(S(0), -1)", lambda: torch.softmax(da, -1).to_local(),
         lambda: torch.softmax(la, -1)),
    ]
    # Autograd recording, as ours: a graph kept alive holds the leaves' accumulators.
    ga, gb, gr = (t.detach().requires_grad_() for t in (da, db, dr))
    keep_graph = torch.add(torch.add(ga, gb), torch.sum(torch.mm(ga, gr)))  # noqa: F841
    recorded = [
        ("add(S(0), S(0))", lambda: torch.add(ga, gb), lambda: torch.add(da, db)),
        ("mul(S(0), 0.5)", lambda: torch.mul(ga, 0.5), lambda: torch.mul(da, 0.5)),
        ("mm(S(0), R)", lambda: torch.mm(ga, gr), lambda: torch.mm(da, dr)),
        ("sum(S(0), dim=1)", lambda: torch.sum(ga, dim=1), lambda: torch.sum(da, dim=1)),
        ("transpose(S(0), 0, 1)", lambda: torch.transpose(ga, 0, 1),
         lambda: torch.transpose(da, 0, 1)),
    ]

    out = tc.JsonLines("bench_dispatch_torch", args.json)
    batch, min_s = args.batch, args.min_seconds
    tc.print0(f"# bench_dispatch_torch: [8, 8] float32 on a {tc.world()}-rank mesh, PyTorch "
              f"{torch.__version__} (gloo); per-call median over batches of {batch}")
    tc.print0(f"{'op':24s} {'local_us':>9s} {'hit_us':>9s} {'overhead':>9s} {'miss_us':>9s} "
              f"{'check':>5s}")
    all_ok = True
    for name, dt_fn, local_fn in ops:
        ok = torch.equal(dt_fn(), local_fn())
        all_ok = all_ok and ok
        local = tc.time_batched(local_fn, batch, min_s)
        hit = tc.time_batched(dt_fn, batch, min_s)
        # A PyTorch cache miss costs milliseconds (the strategy expansion), so single calls
        # (ours: batch / 10 calls of some microseconds each); per-call figures either way.
        miss_batch = max(1, batch // 100)
        clear_only = tc.time_batched(clear_sharding_caches, miss_batch, min_s / 4)

        def miss_fn():
            clear_sharding_caches()
            dt_fn()

        def miss_plan_fn():
            clear_sharding_caches()
            clear_plan_cache()
            dt_fn()

        miss = tc.time_batched(miss_fn, miss_batch, min_s / 2)
        miss_plan = tc.time_batched(miss_plan_fn, miss_batch, min_s / 2)
        overhead_us = (hit[0] - local[0]) * 1e6
        miss_us = (miss[0] - clear_only[0]) * 1e6
        tc.print0(f"{name:24s} {local[0] * 1e6:9.2f} {hit[0] * 1e6:9.2f} {overhead_us:9.2f} "
                  f"{miss_us:9.2f} {'ok' if ok else 'FAIL':>5s}")
        rec = out.record(name)
        rec.update(shape="[8, 8]", ranks=tc.world(), batch=batch)
        tc.add_stats(rec, "", hit)
        rec["baseline"] = "local op"
        tc.add_stats(rec, "baseline", local)
        rec.update(overhead_us=overhead_us, ratio_vs_baseline=hit[0] / local[0])
        tc.add_stats(rec, "miss_raw", miss)
        rec.update(miss_us=miss_us, miss_with_plan_us=(miss_plan[0] - clear_only[0]) * 1e6,
                   correct=ok)
        out.write(rec)

    tc.print0("\n# autograd recording: inputs that require grad vs not")
    for name, rec_fn, plain_fn in recorded:
        # Three alternating rounds, the fastest of each kept (as ours).
        plain = rec_st = None
        for _ in range(3):
            p = tc.time_batched(plain_fn, batch, min_s / 3)
            r = tc.time_batched(rec_fn, batch, min_s / 3)
            plain = p if plain is None or p[0] < plain[0] else plain
            rec_st = r if rec_st is None or r[0] < rec_st[0] else rec_st
        overhead_us = (rec_st[0] - plain[0]) * 1e6
        tc.print0(f"{name:24s} {plain[0] * 1e6:9.2f} {rec_st[0] * 1e6:9.2f} {overhead_us:9.2f}")
        rec = out.record("record " + name)
        rec["ranks"] = tc.world()
        tc.add_stats(rec, "", rec_st)
        rec["baseline"] = "the op without recording"
        tc.add_stats(rec, "baseline", plain)
        rec["overhead_us"] = overhead_us
        out.write(rec)
    return tc.finish(all_ok)


if __name__ == "__main__":
    sys.exit(main())
