"""Shared plumbing of the PyTorch side-by-side benchmarks (benchmarks/pytorch/*.py): the process
group, and timing and JSON lines that mirror benchmarks/common/bench_common.cc, so that a
figure here means what the same figure of ours means:

- time_interleaved: every iteration runs each function after a barrier; the time of iteration i
  is the maximum over ranks (one all-reduce of the samples at the end), median / p10 / p90 by
  nearest rank over the iterations; optionally in an order shuffled per iteration (the same on
  every rank).
- iters_for_budget: one timed run (max over ranks) decides how many iterations fit a budget.
- time_batched: per-call time over batches of calls (single process).

Run under torchrun (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in the environment) with the
gloo backend, one compute thread per rank. PyTorch's public API only, except where a comment says
a private hook is read (cache clearing for the cache-miss figures)."""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.distributed as dist


def init(argv_parser: argparse.ArgumentParser):
    """Parses the arguments, sets one thread, joins the gloo process group. Returns args."""
    argv_parser.add_argument("--json", required=True, help="JSON lines output (rank 0 writes)")
    args = argv_parser.parse_args()
    torch.set_num_threads(1)
    if "RANK" not in os.environ:  # a plain `python script.py`: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(29500 + os.getpid() % 1000))
    dist.init_process_group("gloo")
    return args


def rank():
    return dist.get_rank()


def world():
    return dist.get_world_size()


def print0(*a, **kw):
    if rank() == 0:
        print(*a, **kw, flush=True)


def barrier():
    if world() > 1:
        dist.barrier()


def stats_of(seconds):
    """(median, p10, p90): nearest rank on the sorted sample, as bench_common's stats_of."""
    s = sorted(seconds)
    if not s:
        return 0.0, 0.0, 0.0
    at = lambda q: s[min(len(s) - 1, int(math.floor(q * (len(s) - 1) + 0.5)))]  # noqa: E731
    return at(0.5), at(0.1), at(0.9)


def _max_over_ranks(values):
    t = torch.tensor(values, dtype=torch.float64)
    if world() > 1 and t.numel() > 0:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def time_interleaved(fns, warmup, iters, shuffled=False):
    """One (median, p10, p90) in seconds per function, as bench::time_interleaved."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    order = list(range(len(fns)))
    rng = random.Random(12345)
    t = [[0.0] * iters for _ in fns]
    for i in range(iters):
        if shuffled:
            rng.shuffle(order)
        for j in order:
            barrier()
            t0 = time.perf_counter()
            fns[j]()
            t[j][i] = time.perf_counter() - t0
    flat = _max_over_ranks([v for row in t for v in row])
    return [stats_of(flat[j * iters:(j + 1) * iters]) for j in range(len(fns))]


def iters_for_budget(fn, budget, lo, hi):
    barrier()
    t0 = time.perf_counter()
    fn()
    t = _max_over_ranks([time.perf_counter() - t0])[0]
    n = budget / t if t > 0 else hi
    return int(min(max(int(n), lo), hi))


def time_batched(fn, batch, min_seconds, min_batches=15):
    """Per-call (median, p10, p90) over batches of `batch` calls, as bench::time_batched."""
    for _ in range(batch):
        fn()
    per_call, total = [], 0.0
    while len(per_call) < min_batches or total < min_seconds:
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        s = time.perf_counter() - t0
        total += s
        per_call.append(s / batch)
    return stats_of(per_call)


def add_stats(rec, prefix, st):
    """Adds <prefix>median_us / p10_us / p90_us, the fields bench_common's add_stats writes."""
    p = prefix + "_" if prefix else ""
    rec[p + "median_us"], rec[p + "p10_us"], rec[p + "p90_us"] = (v * 1e6 for v in st)
    return rec


class JsonLines:
    """One JSON object per line, written by rank 0 only; every record carries the bench name
    ("<ours>_torch"), the case name and the PyTorch version."""

    def __init__(self, bench, path):
        self.bench = bench
        self.fh = open(path, "w") if rank() == 0 else None

    def record(self, name):
        return {"bench": self.bench, "name": name, "torch": torch.__version__}

    def write(self, rec):
        if self.fh:
            self.fh.write(json.dumps(rec) + "\n")
            self.fh.flush()


def finish(ok):
    """Agrees on the result over the ranks, leaves the group; the exit status."""
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32)
    if world() > 1:
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()
    return 0 if int(flag.item()) == 1 else 1
