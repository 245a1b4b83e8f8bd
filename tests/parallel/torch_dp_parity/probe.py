"""PyTorch half of the data-parallel side-by-side probe (issue P6 / round 6).

Run: /root/venv/bin/torchrun --nproc-per-node N probe.py   (N = 2 or 4; gloo, CPU)
Writes torch_w<N>_r<rank>.json; probe.cc (mpirun -np N) writes dt_w<N>_r<rank>.json and
compare.py prints the differences. The model, its initial values and the batches are the same
deterministic formulas on both sides (model() and batch() below, Net / batch in probe.cc).
"""
import contextlib, json, math, torch, torch.distributed as dist
import torch.nn as nn, torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.tensor import DTensor, Shard, Replicate, Partial

dist.init_process_group("gloo")
R, W = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (W,))
V, D, H, T = 7, 4, 5, 3        # vocab (uneven on 2 and 4 ranks), dim, hidden, sequence
ROWS = 4                       # global batch rows: ROWS / W per rank
out = []


class Net(nn.Module):
    # h = tanh(fc1(ln(emb(tok)))); h = frozen(h); on even steps h = h + extra(h);
    # logits = h @ emb.weight^T (tied head). frozen.* do not require grad.
    def __init__(self, dtype):
        super().__init__()
        self.emb = nn.Embedding(V, D, dtype=dtype)
        self.ln = nn.LayerNorm(D, dtype=dtype)
        self.fc1 = nn.Linear(D, H, dtype=dtype)
        self.frozen = nn.Linear(H, D, dtype=dtype)
        self.extra = nn.Linear(D, D, bias=False, dtype=dtype)
        self.step = 0
        with torch.no_grad():
            for k, (n, p) in enumerate(self.named_parameters()):
                p.copy_(torch.tensor([0.3 * math.sin(0.37 * i + 1.1 * k + 0.2)
                                      for i in range(p.numel())]).reshape(p.shape))
        for p in self.frozen.parameters():
            p.requires_grad_(False)

    def forward(self, tok):
        h = torch.tanh(self.fc1(self.ln(self.emb(tok))))
        h = self.frozen(h)
        if self.step % 2 == 0:
            h = h + self.extra(h)
        return F.linear(h, self.emb.weight)


def batch(step, micro=0):
    tok = torch.tensor([[(b * 3 + t * 5 + step + 2 * micro) % V for t in range(T)] for b in range(ROWS)])
    tgt = torch.tensor([[(b * 2 + t + 3 * step + micro) % V for t in range(T)] for b in range(ROWS)])
    per = ROWS // W
    return tok[R * per:(R + 1) * per], tgt[R * per:(R + 1) * per].reshape(-1)


def pl(p):
    s = []
    for x in p:
        if type(x) is Shard: s.append("S(%d)" % x.dim)  # _StridedShard: its own str()
        elif isinstance(x, Replicate): s.append("R")
        elif isinstance(x, Partial): s.append("P(%s)" % x.reduce_op)
        else: s.append(str(x))
    return s


def rec(name, t):
    if t is None:
        out.append(dict(case=name, value="None")); return
    if isinstance(t, DTensor):
        l = t.to_local()
        out.append(dict(case=name, placements=pl(t.placements), lshape=list(l.shape),
                        local=[float(v) for v in l.double().flatten().tolist()], gshape=list(t.shape)))
    elif isinstance(t, torch.Tensor):
        out.append(dict(case=name, placements=["local"], lshape=list(t.shape),
                        local=[float(v) for v in t.double().flatten().tolist()], gshape=list(t.shape)))
    else:
        out.append(dict(case=name, value=float(t) if isinstance(t, (int, float)) else str(t)))


def shard(m, mode, reshard=True, mp=None):
    kw = dict(mesh=mesh, reshard_after_forward=reshard)
    if mp is not None: kw["mp_policy"] = mp
    if mode == "fsdp":
        for c in (m.fc1, m.frozen, m.extra):
            fully_shard(c, **kw)
        fully_shard(m, **kw)
        return m
    # DistributedDataParallel (composable replicate's module has no no_sync in 2.15); the
    # names, steps and state_dict are read from the wrapped module.
    return DDP(m, find_unused_parameters=True)


def run(tag, mode, opt_kind, reshard=True, accum=1, mp=None, dtype=torch.float64, steps=5):
    m = Net(dtype)
    wrapped = shard(m, mode, reshard, mp)
    params = [p for p in m.parameters() if p.requires_grad]
    opt = (torch.optim.AdamW(params, lr=1e-2) if opt_kind == "adamw"
           else torch.optim.SGD(params, lr=0.1, momentum=0.9))
    for step in range(steps):
        m.step = step
        opt.zero_grad()
        for micro in range(accum):
            last = micro == accum - 1
            if accum > 1:
                if mode == "fsdp": m.set_requires_gradient_sync(last)
            tok, tgt = batch(step, micro)
            # DDP: no_sync() for all but the last micro-batch (FSDP2: set_requires_gradient_sync).
            with (wrapped.no_sync() if mode == "ddp" and not last else contextlib.nullcontext()):
                loss = F.cross_entropy(wrapped(tok).reshape(-1, V), tgt)
                loss.backward()
            rec("%s step%d micro%d loss" % (tag, step, micro), loss.detach().double().item())
        for n, p in m.named_parameters():
            if step in (0, 1, 4):
                rec("%s step%d grad %s" % (tag, step, n), p.grad)
        if step == 4:
            tn = torch.nn.utils.clip_grad_norm_(params, 0.05)
            rec("%s step%d clip total_norm" % (tag, step), tn.full_tensor() if isinstance(tn, DTensor) else tn)
            for n, p in m.named_parameters():
                rec("%s step%d clipped grad %s" % (tag, step, n), p.grad)
        opt.step()
    for n, p in m.named_parameters():
        rec("%s final param %s" % (tag, n), p)
    rec("%s state_dict keys" % tag, " ".join(m.state_dict().keys()))
    for k, v in opt.state_dict()["state"].items():
        for sk, sv in v.items():
            if isinstance(sv, torch.Tensor) and sv.dim() > 0:
                rec("%s optim state %d %s" % (tag, k, sk), sv)
    return m


torch.set_default_dtype(torch.float64)
if __name__ == "__main__":
    for name, f in [
        ("fsdp_adamw", lambda: run("fsdp_adamw", "fsdp", "adamw")),
        ("fsdp_sgd_noreshard", lambda: run("fsdp_sgd_noreshard", "fsdp", "sgd", reshard=False)),
        ("fsdp_accum3", lambda: run("fsdp_accum3", "fsdp", "sgd", accum=3)),
        ("fsdp_mp_bf16", lambda: run("fsdp_mp_bf16", "fsdp", "adamw", dtype=torch.float32,
                                     mp=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))),
        ("ddp_adamw", lambda: run("ddp_adamw", "ddp", "adamw")),
        ("ddp_accum3", lambda: run("ddp_accum3", "ddp", "sgd", accum=3)),
    ]:
        try:
            f()
        except Exception as e:
            out.append(dict(case=name, error=type(e).__name__ + ": " + str(e)[:200]))
    json.dump(out, open("torch_w%d_r%d.json" % (W, R), "w"))
    dist.destroy_process_group()
