"""PyTorch half of the context-parallel side-by-side probe (round 8d).

Run: /root/venv/bin/torchrun --nproc-per-node N probe.py   (N = 2 or 4; gloo, CPU, float64)
Writes torch_w<N>_r<rank>.json; probe.cc (mpirun -np N) writes dt_w<N>_r<rank>.json and
compare.py N prints the differences (README.md).
PyTorch 2.15's context_parallel does not run attention on CPU (its ring handles the CUDA sdpa
kernels only; CPU sdpa's _scaled_dot_product_flash_attention_for_cpu has no sharding strategy):
the case 'torch_cp_sdpa' records that error. What is compared:
  lb_index / lb_restore: _HeadTailLoadBalancer's indices, called directly;
  shard / unshard: the buffers as context_parallel leaves them on each rank (load balance on or
    off, S divisible by 2 * N or not, seq dims 0, 1, 2), and context_parallel_unshard of them;
  ring: PyTorch's ring (_templated_ring_attention and its backward, private) called directly
    with the CPU flash kernels: each rank's shard of the output and q / k / v gradients;
  attn / model: single-device F.scaled_dot_product_attention (causal or not, GQA, scale) and a
    Linear -> attention -> Linear model: output, loss and gradients, the whole tensors (dtensor's
    side runs ring_attention on N ranks and un-shards them).
"""
import math, json, torch, torch.distributed as dist
import torch.nn as nn, torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.experimental._attention import (
    context_parallel_unshard, _cp_options, _HeadTailLoadBalancer, set_rotate_method)
from torch.distributed.tensor.experimental._context_parallel._attention import (
    _templated_ring_attention, _templated_ring_attention_backward)

dist.init_process_group("gloo")
R, W = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (W,))
torch.set_default_dtype(torch.float64)
out = []


def rec(name, t):
    if isinstance(t, torch.Tensor):
        out.append(dict(case=name, shape=list(t.shape), values=[float(v) for v in t.double().flatten().tolist()]))
    else:
        out.append(dict(case=name, value=str(t)))


def err(name, e):
    out.append(dict(case=name, error="%s: %s" % (type(e).__name__, str(e).split('\n')[0][:200])))


def formula(shape, a, b):  # value i = sin(a i + b), i the flat index
    n = math.prod(shape)
    return torch.tensor([math.sin(a * i + b) for i in range(n)]).reshape(shape)


# Load balancer indices (head-tail; S not a multiple of 2 W raises).
for S in (8, 12, 16, 6):
    for restore in (False, True):
        name = "lb_%s S%d" % ("restore" if restore else "index", S)
        try:
            rec(name, _HeadTailLoadBalancer(S, W, "cpu")._generate_indices(restore=restore)[0])
        except Exception as e:
            err(name, e)

# Buffers as context_parallel shards them, and context_parallel_unshard.
B, H = 2, 2
for S in (8, 12, 6, 5):
    for lb in (True, False):
        _cp_options.enable_load_balance = lb
        tok = torch.arange(B * S, dtype=torch.float64).reshape(B, S)
        q = torch.arange(B * H * S * 3, dtype=torch.float64).reshape(B, H, S, 3)
        pos = torch.arange(S, dtype=torch.float64)
        bufs = {"tok": (tok, 1), "q": (q, 2), "pos": (pos, 0)}
        try:
            with context_parallel(mesh, buffers=[tok, q, pos], buffer_seq_dims=[1, 2, 0],
                                  no_restore_buffers={tok, q, pos}):
                pass
        except Exception as e:
            for n in bufs: err("shard %s S%d lb%d" % (n, S, lb), e)
            continue
        for n, (t, d) in bufs.items():
            rec("shard %s S%d lb%d" % (n, S, lb), t)
            name = "unshard %s S%d lb%d" % (n, S, lb)
            if S % W:  # the shards' lengths differ: gloo's all_gather aborts the process
                err(name, RuntimeError("not run: uneven shards abort gloo's all_gather"))
                continue
            try:
                rec(name, context_parallel_unshard(mesh, [t], [d])[0])
            except Exception as e:
                err(name, e)
_cp_options.enable_load_balance = True

# PyTorch's own context_parallel attention on CPU.
try:
    q, k, v = (formula([1, 2, 8, 4], 0.3 + j, 0.1) for j in range(3))
    with context_parallel(mesh, buffers=[q, k, v], buffer_seq_dims=[2, 2, 2], no_restore_buffers={q, k, v}):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    rec("torch_cp_sdpa", "ok")
except Exception as e:
    err("torch_cp_sdpa", e)

# PyTorch's ring itself (its private _templated_ring_attention and its backward, what the CUDA
# path calls) driven on CPU with the CPU flash kernels, merging in float64: each rank's shard of
# the output and of the gradients of sum(out * coeff), all in the layout (head-tail when lb).
aten = torch.ops.aten
_cp_options.convert_to_f32 = False
for rot in ("allgather", "alltoall"):
    set_rotate_method(rot)
    for S in (8, 16):
        for causal in (False, True):
            for lb in (False, True):
                for scale in (None, 0.3):
                    name = "ring S%d c%d lb%d %s s%s" % (S, causal, lb, rot, scale)
                    _cp_options.enable_load_balance = lb
                    idx = _HeadTailLoadBalancer(S, W, "cpu")._generate_indices()[0]
                    lay = lambda t: (t.index_select(2, idx) if lb else t).chunk(W, dim=2)[R].contiguous()
                    q = lay(formula([2, 4, S, 3], 0.37, 0.2))
                    k = lay(formula([2, 4, S, 3], 0.53, 0.4))
                    v = lay(formula([2, 4, S, 3], 0.71, 0.9))
                    g = lay(formula([2, 4, S, 3], 0.29, 0.7))
                    try:
                        o, lse = _templated_ring_attention(
                            mesh.get_group(), 2, aten._scaled_dot_product_flash_attention_for_cpu.default,
                            q, k, v, is_causal=causal, scale=scale)[:2]
                        dq, dk, dv = _templated_ring_attention_backward(
                            mesh.get_group(), 2, aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
                            grad_out=g, grad_out_name="grad_out", query=q, key=k, value=v, out=o,
                            logsumexp=lse, is_causal=causal, dropout_p=0.0, scale=scale)[:3]
                    except Exception as e:
                        err(name, e)
                        continue
                    for n, t in (("out", o), ("dq", dq), ("dk", dk), ("dv", dv)):
                        rec(name + " " + n, t)
_cp_options.enable_load_balance = True
_cp_options.convert_to_f32 = True
set_rotate_method("allgather")

# Single-device attention: output and gradients of sum(out * coeff).
for S in (8, 12, 5):
    for causal in (False, True):
        for Hk in (4, 2):
            for scale in (None, 0.3):
                name = "attn S%d c%d hk%d s%s" % (S, causal, Hk, scale)
                q = formula([2, 4, S, 3], 0.37, 0.2).requires_grad_()
                k = formula([2, Hk, S, 3], 0.53, 0.4).requires_grad_()
                v = formula([2, Hk, S, 3], 0.71, 0.9).requires_grad_()
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=Hk != 4)
                (o * formula(o.shape, 0.29, 0.7)).sum().backward()
                for n, t in (("out", o), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
                    rec(name + " " + n, t)


# A model: Linear (q, k, v) -> attention -> Linear, loss sum(y * coeff).
class Net(nn.Module):
    def __init__(self, E, heads):
        super().__init__()
        self.heads = heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(E, E) for _ in range(4))

    def forward(self, x, causal):
        Bx, S, E = x.shape
        split = lambda t: t.reshape(Bx, S, self.heads, E // self.heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(split(self.wq(x)), split(self.wk(x)), split(self.wv(x)),
                                           is_causal=causal)
        return self.wo(a.transpose(1, 2).reshape(Bx, S, E))


for S in (8, 12):
    for causal in (False, True):
        name = "model S%d c%d" % (S, causal)
        m = Net(8, 2)
        with torch.no_grad():
            for j, (n, p) in enumerate(m.named_parameters()):
                p.copy_(0.3 * formula(p.shape, 0.37, 1.1 * j + 0.2))
        x = formula([2, S, 8], 0.53, 0.4).requires_grad_()
        y = m(x, causal)
        loss = (y * formula(y.shape, 0.71, 0.3)).sum()
        loss.backward()
        rec(name + " y", y)
        rec(name + " loss", loss.detach())
        rec(name + " dx", x.grad)
        for n, p in m.named_parameters():
            rec(name + " grad " + n, p.grad)

json.dump(out, open("torch_w%d_r%d.json" % (W, R), "w"))
dist.destroy_process_group()
