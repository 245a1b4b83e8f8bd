# Shared by probe*.py (exec'd into their namespace): process group, meshes and the recorders.
import json, os, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor, DTensor, Shard, Replicate, Partial
dist.init_process_group("gloo")
r = dist.get_rank()
m1 = init_device_mesh("cpu", (4,))
m2 = init_device_mesh("cpu", (2, 2))
out = []
def pl(p):
    s=[]
    for x in p:
        if isinstance(x, Shard): s.append("S(%d)"%x.dim)
        elif isinstance(x, Replicate): s.append("R")
        elif isinstance(x, Partial): s.append("P(%s)"%x.reduce_op)
        else: s.append(str(x))
    return s
def rec(name, d):
    if isinstance(d, DTensor):
        l = d.to_local()
        out.append(dict(case=name, placements=pl(d.placements), lshape=list(l.shape), local=[round(float(v),6) for v in l.flatten().tolist()], gshape=list(d.shape), gstride=list(d.stride())))
    else:
        out.append(dict(case=name, value=str(d)))
def tryrec(name, f):
    try: rec(name, f())
    except Exception as e: out.append(dict(case=name, error=type(e).__name__+": "+str(e)[:150]))
def ar(*s): return torch.arange(float(torch.tensor(s).prod())).reshape(*s)
