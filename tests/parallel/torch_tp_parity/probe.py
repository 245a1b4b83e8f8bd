"""PyTorch half of the tensor-parallel side-by-side probe (round 7a).

Run: /root/venv/bin/torchrun --nproc-per-node N probe.py   (N = 2 or 4; gloo, CPU, float64)
Writes torch_w<N>_r<rank>.json; probe.cc (mpirun -np N) writes dt_w<N>_r<rank>.json and
compare.py N prints the differences. Every case builds a small module with the same
deterministic parameters on both sides (init() / init_params in probe.cc), parallelizes it with
one plan, and runs 3 steps of AdamW and of SGD (momentum 0.9): per step the forward output, the
loss, the input gradient, every parameter gradient and the parameters after the step; the
parameters are also recorded right after parallelize_module. Errors raised by bad plans are
recorded as 'error' (compare.py only checks that both sides raise).
"""
import importlib.util, json, math, os, sys, warnings, torch, torch.distributed as dist
import torch.nn as nn, torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Shard, Replicate, Partial
from torch.distributed.tensor.parallel import (parallelize_module, ColwiseParallel, RowwiseParallel,
                                               SequenceParallel, PrepareModuleInput,
                                               PrepareModuleOutput, loss_parallel)

# The process group, the 1-d mesh, the records and their writers (pl, rec, out) are the
# data-parallel probe's (torch_dp_parity/probe.py), loaded by path under another name.
_spec = importlib.util.spec_from_file_location(
    "dp_probe", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch_dp_parity", "probe.py"))
dp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dp)
R, W, mesh, out, rec = dp.R, dp.W, dp.mesh, dp.out, dp.rec
torch.set_default_dtype(torch.float64)
B, T, D = 2, 4, 4   # batch, sequence (divisible by 2 and 4), model dim


def init(m):
    with torch.no_grad():
        for k, (n, p) in enumerate(m.named_parameters()):
            p.copy_(torch.tensor([0.3 * math.sin(0.37 * i + 1.1 * k + 0.2)
                                  for i in range(p.numel())]).reshape(p.shape))
    return m


def full_input(shape, step):
    n = math.prod(shape)
    return torch.tensor([math.sin(0.53 * i + 0.9 * step + 0.4) for i in range(n)]).reshape(shape)


def tokens(step, V=7):
    return torch.tensor([[(b * 3 + t * 5 + step) % V for t in range(T)] for b in range(B)])


def coeff(shape):
    n = math.prod(shape)
    return torch.tensor([math.cos(0.71 * i + 0.3) for i in range(n)]).reshape(shape)


class Wrap(nn.Module):  # a container for PrepareModuleInput / PrepareModuleOutput
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


class MLP(nn.Module):
    def __init__(self, d=D, h=8):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


class Attention(nn.Module):  # heads sharded by the colwise q / k / v (2 of 4 heads per rank on 2)
    def __init__(self, d=8, hd=2):
        super().__init__()
        self.hd = hd
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (w(x).view(b, t, -1, self.hd).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, d=8, h=8):
        super().__init__()
        self.w1, self.w2, self.w3 = nn.Linear(d, h, bias=False), nn.Linear(h, d, bias=False), nn.Linear(d, h, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):  # torchtitan's TransformerBlock, small
    def __init__(self, d=8):
        super().__init__()
        self.attention_norm, self.attention = nn.RMSNorm(d), Attention(d)
        self.ffn_norm, self.feed_forward = nn.RMSNorm(d), FeedForward(d)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Chain(nn.Module):  # rowwise -> sequence-parallel norm -> colwise, DTensors between
    def __init__(self):
        super().__init__()
        self.row, self.norm, self.col = nn.Linear(8, D), nn.LayerNorm(D), nn.Linear(D, 6)

    def forward(self, x):
        return self.col(self.norm(self.row(x)))


def block_plan(sp):  # torchtitan's plan for one block (sequence parallel or not)
    seq = Shard(1) if sp else Replicate()
    p = {"attention": PrepareModuleInput(input_layouts=(seq,), desired_input_layouts=(Replicate(),)),
         "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
         "attention.wo": RowwiseParallel(output_layouts=seq),
         "feed_forward": PrepareModuleInput(input_layouts=(seq,), desired_input_layouts=(Replicate(),)),
         "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(output_layouts=seq),
         "feed_forward.w3": ColwiseParallel()}
    if sp:
        p.update({"attention_norm": SequenceParallel(use_local_output=True),
                  "ffn_norm": SequenceParallel(use_local_output=True)})
    return p


def weighted_loss(y):
    f = y.full_tensor() if isinstance(y, DTensor) else y
    return (f * coeff(f.shape)).sum()


def run(tag, build, plan, x_full=None, in_layout=None, tok=False, loss=weighted_loss, fsdp=False,
        pmesh=None):
    """x_full(step) -> the global input; in_layout: None (replicated) or a dim the local input
    is the torch.chunk of."""
    pmesh = pmesh or mesh
    if R == 0: print("case", tag, file=sys.stderr, flush=True)
    for opt_kind in ("adamw", "sgd"):
        t = "%s %s" % (tag, opt_kind)
        try:
            m = init(build())
            parallelize_module(m, pmesh, plan)
            if fsdp:
                fully_shard(m, mesh=fsdp)
            for n, p in m.named_parameters():
                if opt_kind == "adamw": rec("%s parallelized %s" % (tag, n), p)
            opt = (torch.optim.AdamW(m.parameters(), lr=1e-2) if opt_kind == "adamw"
                   else torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9))
            for step in range(3):
                opt.zero_grad()
                if tok:
                    x = tokens(step)
                else:
                    xf = x_full(step)
                    x = xf if in_layout is None else torch.chunk(xf, W if not fsdp else 2, in_layout)[R % 2 if fsdp else R]
                    x = x.clone().requires_grad_(True)
                y = m(x)
                rec("%s step%d out" % (t, step), y.detach() if not isinstance(y, DTensor) else y)
                l = loss(y)
                rec("%s step%d loss" % (t, step), l.detach())
                l.backward()
                if not tok: rec("%s step%d input grad" % (t, step), x.grad)
                for n, p in m.named_parameters():
                    rec("%s step%d grad %s" % (t, step, n), p.grad)
                opt.step()
                for n, p in m.named_parameters():
                    rec("%s step%d param %s" % (t, step, n), p)
                    if fsdp:  # the layouts differ (docs/SEMANTICS.md): the values gathered
                        rec("%s step%d full param %s" % (t, step, n), p.full_tensor())
                        rec("%s step%d full grad %s" % (t, step, n), p.grad.full_tensor())
        except Exception as e:
            out.append(dict(case=t, error=type(e).__name__ + ": " + str(e)[:200]))


def x3(step, d=D): return full_input((B, T, d), step)


def ce_loss(full=False, **kw):
    def f(y):
        tgt = torch.tensor([[(b * 2 + t + 1) % 7 for t in range(T)] for b in range(B)]).reshape(-1)
        kw2 = dict(kw)
        if kw2.pop("ignore_all", False):
            tgt[:] = -100
        if kw2.pop("ignore", False):
            tgt[1] = kw.get("ignore_index", -100); tgt[6] = kw.get("ignore_index", -100)
        if "weight" in kw2: kw2["weight"] = torch.tensor([0.5 + 0.1 * c for c in range(7)])
        if full:  # the reference for what loss_parallel refuses: the gathered logits
            l = F.cross_entropy(y.full_tensor().flatten(0, 1), tgt, **kw2)
            l.backward()
            return l
        three_d = kw2.pop("three_d", False)  # [B, 7, T] logits (class dim 1), [B, T] targets
        with loss_parallel():
            if three_d:
                l = F.cross_entropy(y.transpose(1, 2), tgt.reshape(B, T), **kw2)
            else:
                l = F.cross_entropy(y.flatten(0, 1), tgt, **kw2)
            if kw2.get("reduction") == "none":
                l = (l.full_tensor() * coeff(l.shape)).sum()
            l.backward()
        return l
    return f


def run_loss(tag, full=False, **kw):
    """Loss parallel: a colwise Linear(D, 7) keeps vocab-sharded logits (DTensor S(-1)) and
    cross_entropy runs under loss_parallel (full: on the gathered logits, without it)."""
    f = ce_loss(full, **kw)

    def loss(y):
        return _Done(f(y))
    run(tag, lambda: nn.Linear(D, 7),
        ColwiseParallel(output_layouts=Shard(-1), use_local_output=False), x3, loss=loss)


class _Done:  # the loss was already backpropagated inside loss_parallel
    def __init__(self, l): self.l = l
    def detach(self): return self.l.detach().full_tensor() if isinstance(self.l, DTensor) else self.l.detach()
    def backward(self): pass


def err(tag, f):
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            f()
        out.append(dict(case=tag, value="ok" + ("" if not w else " (warning: %s)" % str(w[0].message)[:120])))
    except Exception as e:
        out.append(dict(case=tag, error=type(e).__name__ + ": " + str(e)[:200]))


if __name__ == "__main__":
    Lin = lambda i=D, o=5, b=True: (lambda: nn.Linear(i, o, bias=b))
    run("col_default", Lin(), ColwiseParallel(), x3)
    run("col_out_R", Lin(), ColwiseParallel(output_layouts=Replicate()), x3)
    run("col_dtensor", Lin(), ColwiseParallel(use_local_output=False), x3)
    run("col_in_S1", Lin(D, 6), ColwiseParallel(input_layouts=Shard(1)), x3, in_layout=1)
    run("col_in_S1_out_R_dt", Lin(D, 6), ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate(),
                                                         use_local_output=False), x3, in_layout=1)
    run("row_default", Lin(8, 3), RowwiseParallel(), lambda s: x3(s, 8), in_layout=2)
    run("row_in_R", Lin(8, 3), RowwiseParallel(input_layouts=Replicate()), lambda s: x3(s, 8))
    run("row_out_S1", Lin(8, 3), RowwiseParallel(output_layouts=Shard(1)), lambda s: x3(s, 8), in_layout=2)
    run("row_out_S1_dt", Lin(8, 3), RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
        lambda s: x3(s, 8), in_layout=2)
    run("row_dtensor", Lin(8, 3, False), RowwiseParallel(use_local_output=False), lambda s: x3(s, 8), in_layout=2)
    run("row_in_S0", Lin(8, 3), RowwiseParallel(input_layouts=Shard(0)), lambda s: full_input((4, T, 8), s),
        in_layout=0)
    run("col_out_S1_dt", Lin(D, 8), ColwiseParallel(output_layouts=Shard(1), use_local_output=False), x3)
    run("col_in_partial", Lin(D, 6), ColwiseParallel(input_layouts=Partial()), x3)
    run("row_uneven_in5", Lin(5, 3), RowwiseParallel(input_layouts=Replicate()), lambda s: x3(s, 5))
    run("row_uneven_in5_S", Lin(5, 3), RowwiseParallel(), lambda s: x3(s, 5), in_layout=2)
    run("col_uneven_out5_R", Lin(D, 5), ColwiseParallel(output_layouts=Replicate(), use_local_output=False), x3)
    run("seq_layernorm", lambda: nn.LayerNorm(D), SequenceParallel(), x3, in_layout=1)
    run("seq_layernorm_local", lambda: nn.LayerNorm(D), SequenceParallel(use_local_output=True), x3, in_layout=1)
    run("seq_rmsnorm", lambda: nn.RMSNorm(D), SequenceParallel(), x3, in_layout=1)
    run("seq_rmsnorm_dim0", lambda: nn.RMSNorm(D), SequenceParallel(sequence_dim=0), lambda s: full_input((T, B, D), s),
        in_layout=0)
    run("prep_in_col", lambda: Wrap(nn.Linear(D, 6)),
        {"": PrepareModuleInput(input_layouts=Shard(1), desired_input_layouts=Replicate()),
         "inner": ColwiseParallel()}, x3, in_layout=1)
    run("prep_in_local", lambda: Wrap(nn.Linear(D, 6)),
        {"": PrepareModuleInput(input_layouts=Shard(1), desired_input_layouts=Replicate(), use_local_output=True)},
        x3, in_layout=1)
    run("prep_in_none", lambda: Wrap(nn.Linear(D, 6)),
        {"": PrepareModuleInput(input_layouts=(None,), desired_input_layouts=(None,))}, x3)
    # 8 outputs: even shards (torch.chunk of 6 on 4 ranks, 2 2 2 0, taken by from_local as even
    # shards, makes PyTorch's gather hang on gloo; dtensor raises a collective mismatch).
    run("prep_out_gather", lambda: Wrap(nn.Linear(D, 8)),
        {"": PrepareModuleOutput(output_layouts=Shard(-1), desired_output_layouts=Replicate()),
         "inner": ColwiseParallel()}, x3)
    run("prep_out_dt", lambda: Wrap(nn.Linear(D, 8)),
        {"": PrepareModuleOutput(output_layouts=Shard(-1), desired_output_layouts=Shard(1), use_local_output=False),
         "inner": ColwiseParallel()}, x3)
    run("emb_row", lambda: nn.Embedding(7, D), RowwiseParallel(), tok=True)
    run("emb_row_S1", lambda: nn.Embedding(7, D), RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1),
                                                                   use_local_output=False), tok=True)
    run("emb_col", lambda: nn.Embedding(7, D), ColwiseParallel(), tok=True)
    run("emb_col_R", lambda: nn.Embedding(7, 6), ColwiseParallel(output_layouts=Replicate()), tok=True)
    run("emb_row_pad", lambda: nn.Embedding(7, D, padding_idx=3), RowwiseParallel(input_layouts=Replicate()), tok=True)
    run("emb_col_pad", lambda: nn.Embedding(7, D, padding_idx=3), ColwiseParallel(), tok=True)
    run("emb_col_S1", lambda: nn.Embedding(7, D), ColwiseParallel(output_layouts=Shard(1), use_local_output=False),
        tok=True)
    run("emb_row_S0", lambda: nn.Embedding(7, D), RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(0),
                                                                   use_local_output=False), tok=True)
    run("row_out_S1_T5_dt", Lin(8, 3), RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
        lambda s: full_input((B, 5, 8), s), in_layout=2)
    run("sp_chain_T5", Chain, {"row": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
                               "norm": SequenceParallel(), "col": ColwiseParallel(input_layouts=Shard(1))},
        lambda s: full_input((B, 5, 8), s), in_layout=2)
    # A DTensor reaching a style whose input layout equals its desired one (R) but not the
    # DTensor's (S(1)): PyTorch leaves it as it is, dtensor moves it to the desired layout.
    run("sp_chain_col_default", Chain, {"row": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
                                        "norm": SequenceParallel(), "col": ColwiseParallel()},
        lambda s: full_input((B, T, 8), s), in_layout=2)
    run("prep_out_same_layout", lambda: Wrap(nn.Linear(D, 8)),
        {"": PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Replicate()),
         "inner": ColwiseParallel(use_local_output=False)}, x3)
    # A hidden size of 5: uneven on 2 and 4 ranks, passed as a DTensor or as local shards.
    run("mlp5_dt", lambda: MLP(D, 5), {"fc1": ColwiseParallel(use_local_output=False), "fc2": RowwiseParallel()}, x3)
    run("mlp5_local", lambda: MLP(D, 5), {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}, x3)
    run("mlp", MLP, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}, x3)
    run("mlp_sp", lambda: Wrap(MLP()),
        {"inner.fc1": ColwiseParallel(input_layouts=Shard(1)),
         "inner.fc2": RowwiseParallel(output_layouts=Shard(1), use_local_output=False)}, x3, in_layout=1)
    run("block", Block, block_plan(False), lambda s: x3(s, 8))
    run("block_sp", Block, block_plan(True), lambda s: x3(s, 8), in_layout=1)
    for name, kw in [("mean", {}), ("sum", dict(reduction="sum")), ("none", dict(reduction="none")),
                     ("ignore", dict(ignore=True)), ("3d", dict(three_d=True, ignore=True)),
                     ("3d_none", dict(three_d=True, reduction="none")), ("ignore_all", dict(ignore_all=True)),
                     ("ignore_all_sum", dict(ignore_all=True, reduction="sum")), ("ignore_index3", dict(ignore=True, ignore_index=3)),
                     ("smooth", dict(label_smoothing=0.1)), ("weight", dict(weight=True)),
                     ("weight_ignore_sum", dict(weight=True, ignore=True, reduction="sum"))]:
        # label_smoothing, and weights with ignored targets, raise under PyTorch's loss_parallel:
        # the error is recorded as '<case> loss_parallel' and the reference computed without it.
        refused = name in ("smooth", "weight_ignore_sum")
        run_loss("loss_" + name + (" loss_parallel" if refused else ""), **kw)
        if refused: run_loss("loss_" + name, full=True, **kw)
    # Loss parallel on replicated logits (the class dim not sharded).
    run("loss_replicated_logits", lambda: nn.Linear(D, 7),
        ColwiseParallel(output_layouts=Replicate(), use_local_output=False), x3, loss=lambda y: _Done(ce_loss()(y)))
    if W == 4:
        m2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        run("fsdp_tp_mlp", MLP, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()},
            lambda s: full_input((2 * B, T, D), s), in_layout=0, fsdp=m2["dp"], pmesh=m2["tp"])
        # Loss parallel under FSDP2 + TP: vocab-sharded logits on tp, each dp rank its rows.
        ce = ce_loss(ignore=True)
        run("fsdp_tp_loss", lambda: nn.Linear(D, 7),
            ColwiseParallel(output_layouts=Shard(-1), use_local_output=False),
            lambda s: full_input((2 * B, T, D), s), in_layout=0, fsdp=m2["dp"], pmesh=m2["tp"],
            loss=lambda y: _Done(ce(y)))
    err("err_col_layernorm", lambda: parallelize_module(nn.LayerNorm(D), mesh, ColwiseParallel()))
    err("err_row_conv", lambda: parallelize_module(nn.Conv1d(2, 4, 3), mesh, RowwiseParallel()))
    err("err_seq_linear", lambda: parallelize_module(nn.Linear(4, 4), mesh, SequenceParallel()))
    err("err_nomatch", lambda: parallelize_module(MLP(), mesh, {"fc3": ColwiseParallel()}))
    err("err_twice", lambda: parallelize_module(MLP(), mesh, {"fc1": ColwiseParallel(), "fc*": RowwiseParallel()}))
    err("err_in_layout_dim", lambda: parallelize_module(nn.Linear(4, 4), mesh,
                                                        RowwiseParallel(input_layouts=Shard(3)))(torch.ones(2, 4)))
    err("err_row_in_wrong_size", lambda: parallelize_module(nn.Linear(8, 4), mesh, RowwiseParallel())(torch.ones(2, 8)))
    if W == 4:
        err("err_2d_mesh", lambda: parallelize_module(
            nn.Linear(4, 4), init_device_mesh("cpu", (2, 2)), ColwiseParallel()))
    json.dump(out, open("torch_w%d_r%d.json" % (W, R), "w"))
    dist.destroy_process_group()
