"""PyTorch half of the pipeline-parallel side-by-side probe (round 7b).

Run: /root/venv/bin/torchrun --nproc-per-node N probe.py   (N = 2 or 4; gloo, CPU, float64)
Writes torch_pp_w<N>_r<rank>.json; probe.cc (mpirun -np N, target torch_pp_probe) writes
dt_pp_w<N>_r<rank>.json and compare.py N prints the differences. The model (one Linear + tanh
per stage, the last stage's Linear without tanh), its initial values and the batches are the
same formulas on both sides (stage_module() / batch() here, Stage / batch in probe.cc).
"""
import datetime, json, math, os, sys, torch, torch.distributed as dist
import torch.nn as nn, torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.pipelining import (pipeline, SplitPoint, PipelineStage, ScheduleGPipe, Schedule1F1B,
                                          ScheduleInterleaved1F1B)

torch.set_default_dtype(torch.float64)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
R, W = dist.get_rank(), dist.get_world_size()
D, O = 4, 3                     # width of the chain, width of the last stage's output
out = []
SCHEDULES = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B, "Interleaved1F1B": ScheduleInterleaved1F1B}


class Stage(nn.Module):
    def __init__(self, s, n):
        super().__init__()
        self.last = s == n - 1
        self.fc = nn.Linear(D, O if self.last else D)
        with torch.no_grad():
            for k, p in enumerate(self.fc.parameters()):
                p.copy_(torch.tensor([0.5 * math.sin(0.37 * i + 1.3 * s + 0.7 * k + 0.2)
                                      for i in range(p.numel())]).reshape(p.shape))

    def forward(self, x):
        y = self.fc(x)
        return y if self.last else torch.tanh(y)


def batch(step, rows):
    x = torch.tensor([[math.sin(0.3 * b + 0.7 * j + 0.1 * step) for j in range(D)] for b in range(rows)])
    y = torch.tensor([[math.cos(0.2 * b + 0.5 * j + 0.3 * step) for j in range(O)] for b in range(rows)])
    return x, y


def rec(name, t):
    if isinstance(t, DTensor):
        t = t.full_tensor()
    if isinstance(t, torch.Tensor):
        out.append(dict(case=name, lshape=list(t.shape), local=[float(v) for v in t.double().flatten().tolist()]))
    else:
        out.append(dict(case=name, value=t))


def order_of(sched):
    order = getattr(sched, "pipeline_order", None)
    if not order:
        return None
    return {r: " ".join(str(a) for a in acts if a is not None and str(a)[-2:-1] != "R"
                        and ("F" in str(a) or "B" in str(a)) and "RED" not in str(a))
            for r, acts in order.items()}


def run(tag, name, v, m, rows, steps=3, clip=False, eval_mode=False, eval_loss=False, dp=1,
        ddp=False):
    # dp > 1: a (pp, dp) mesh, each stage fully_shard-ed over dp, each dp rank pipelining its
    # rows / dp rows of the batch.
    P = W // dp
    n = P * v
    pr, dr, group = R, 0, None
    if dp > 1:
        mesh = init_device_mesh("cpu", (P, dp), mesh_dim_names=("pp", "dp"))
        pr, dr, group = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank(), mesh["pp"].get_group()
    mods = {s: Stage(s, n) for s in range(pr, n, P)}
    wrapped = dict(mods)
    if dp > 1:
        for s, mod in mods.items():
            if ddp:  # DistributedDataParallel on the dp group (PipelineStage's DDP path)
                wrapped[s] = nn.parallel.DistributedDataParallel(mod, process_group=mesh["dp"].get_group())
            else:
                fully_shard(mod, mesh=mesh["dp"])
    stages = [PipelineStage(wrapped[s], s, n, torch.device("cpu"), group=group) for s in sorted(mods)]
    cls = SCHEDULES[name]
    sched = cls(stages if v > 1 or name == "Interleaved1F1B" else stages[0], n_microbatches=m,
                loss_fn=None if eval_mode and not eval_loss else (lambda o, t: F.mse_loss(o, t)))
    o = order_of(sched)
    if o is not None:
        rec(tag + " order", o[pr])
    params = [p for s in sorted(mods) for p in mods[s].parameters()]
    opt = torch.optim.SGD(params, lr=0.1)
    has_first, has_last = 0 in mods, n - 1 in mods
    for step in range(steps):
        x, y = batch(step, rows)
        x, y = x[dr * rows // dp:(dr + 1) * rows // dp], y[dr * rows // dp:(dr + 1) * rows // dp]
        opt.zero_grad()
        losses = []
        args = (x,) if has_first else ()
        if eval_mode:
            if eval_loss:
                res = sched.eval(*args, target=y if has_last else None, losses=losses)
            else:
                res = sched.eval(*args)
            if has_last:
                rec(tag + " step%d eval output" % step, res)
                if eval_loss: rec(tag + " step%d eval losses" % step, [float(l) for l in losses])
            continue
        res = sched.step(*args, target=y if has_last else None, losses=losses)
        if has_last:
            rec(tag + " step%d losses" % step, [float(l) for l in losses])
            rec(tag + " step%d output" % step, res)
        for s in sorted(mods):
            for pn, p in mods[s].named_parameters():
                rec(tag + " step%d grad s%d.%s" % (step, s, pn), p.grad)
        if clip:
            sq = torch.tensor([sum(float((p.grad ** 2).sum()) for p in params)])
            dist.all_reduce(sq)
            norm = math.sqrt(float(sq[0]))
            torch.nn.utils.clip_grads_with_norm_(params, 0.05, torch.tensor(norm))
            rec(tag + " step%d clip total_norm" % step, norm)
            for s in sorted(mods):
                for pn, p in mods[s].named_parameters():
                    rec(tag + " step%d clipped grad s%d.%s" % (step, s, pn), p.grad)
        opt.step()
        for s in sorted(mods):
            for pn, p in mods[s].named_parameters():
                rec(tag + " step%d param s%d.%s" % (step, s, pn), p.detach())


class Chain(nn.Module):  # pipeline()'s tracer split against pipeline_split on the same names
    def __init__(self):
        super().__init__()
        self.tok = nn.Linear(D, D)
        self.layers = nn.ModuleList([nn.Linear(D, D) for _ in range(4)])
        self.norm = nn.LayerNorm(D)
        self.output = nn.Linear(D, O)

    def forward(self, x):
        x = self.tok(x)
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.output(self.norm(x))


def split_case(points):
    tag = "split " + ",".join(points)
    try:  # a fresh model each time: pipeline() leaves its split hooks on the model it traced
        pipe = pipeline(Chain(), mb_args=(torch.zeros(2, D),),
                        split_spec={p: SplitPoint.BEGINNING for p in points})
        for i in range(pipe.num_stages):
            rec(tag + " stage%d" % i, " ".join(n for n, _ in pipe.get_stage_module(i).named_parameters()))
    except Exception as e:  # noqa: BLE001
        out.append(dict(case=tag, error=(type(e).__name__ + ": " + str(e))[:300]))


for points in (["layers.2"], ["layers.1", "norm"], ["layers.3"], ["layers"], ["output"]):
    if R == 0:
        split_case(points)

CASES = []
for name, v in (("GPipe", 1), ("1F1B", 1), ("Interleaved1F1B", 2)):
    for m in (1, 2, 3, 4, 8):
        CASES.append(("%s_m%d" % (name, m), name, v, m, 8 if m != 3 else 6, {}))
CASES.append(("Interleaved1F1B_v1_m4", "Interleaved1F1B", 1, 4, 8, {}))
CASES.append(("Interleaved1F1B_m6", "Interleaved1F1B", 2, 6, 12, {}))
CASES.append(("1F1B_m4_clip", "1F1B", 1, 4, 8, dict(clip=True)))
CASES.append(("Interleaved1F1B_m4_clip", "Interleaved1F1B", 2, 4, 8, dict(clip=True)))
if W == 4:  # pp 2 x dp 2, FSDP2 on each stage
    for name, v in (("GPipe", 1), ("1F1B", 1), ("Interleaved1F1B", 2)):
        CASES.append(("%s_m2_pp2xdp2" % name, name, v, 2, 8, dict(dp=2)))
        # PyTorch 2.15's DDP-wrapped stage fails in its second step ("params_.size() ==
        # rebuilt_param_indices_.size() INTERNAL ASSERT FAILED", reducer.cpp) and leaves the
        # ranks hung: run only with PP_PROBE_DDP=1 PP_PROBE_ONLY=<tag>. compare.py checks
        # dtensor's replicate cases against PyTorch's FSDP2 ones (the same values).
        if os.environ.get("PP_PROBE_DDP"):
            CASES.append(("%s_m2_pp2xdp2_ddp" % name, name, v, 2, 8, dict(dp=2, ddp=True)))
CASES.append(("GPipe_m4_eval", "GPipe", 1, 4, 8, dict(eval_mode=True, steps=1)))
CASES.append(("1F1B_m4_eval", "1F1B", 1, 4, 8, dict(eval_mode=True, steps=1)))
CASES.append(("Interleaved1F1B_m4_eval", "Interleaved1F1B", 2, 4, 8, dict(eval_mode=True, steps=1)))
CASES.append(("1F1B_m4_eval_loss", "1F1B", 1, 4, 8, dict(eval_mode=True, eval_loss=True, steps=1)))

# Last: a batch that does not divide by the microbatch count (torch.tensor_split's rule: 4 + 3
# rows) hangs or fails under PyTorch (the receiving stage's buffer has the first microbatch's
# shape); the files are written before it.
CASES.append(("GPipe_m2_rows7", "GPipe", 1, 2, 7, {}))
ONLY = os.environ.get("PP_PROBE_ONLY")  # run only the cases whose tag contains it
for tag, name, v, m, rows, kw in CASES:
    if ONLY and ONLY not in tag:
        continue
    print(R, tag, file=sys.stderr, flush=True)
    try:
        run(tag, name, v, m, rows, **kw)
    except Exception as e:  # noqa: BLE001
        cause = " (caused by %s: %s)" % (type(e.__cause__).__name__, e.__cause__) if e.__cause__ else ""
        out.append(dict(case=tag, error=(type(e).__name__ + ": " + " ".join(str(e).split()) + cause)[:400]))
    json.dump(out, open("torch_pp_w%d_r%d.json" % (W, R), "w"), indent=0)
    dist.barrier()
dist.destroy_process_group()
