# PyTorch half of the DTensor API probe (see probe.cc); run with torchrun --nproc_per_node 4.
import os
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'common.py')).read())
# sharding conventions
for n in (5,3,2):
    tryrec("dist S0 n=%d"%n, lambda: distribute_tensor(ar(n,2), m1, [Shard(0)]))
tryrec("dist S(-1) 2x5", lambda: distribute_tensor(ar(2,5), m1, [Shard(-1)]))
tryrec("dist S0S0 2d 7x2", lambda: distribute_tensor(ar(7,2), m2, [Shard(0), Shard(0)]))
tryrec("dist S1S0 2d 5x3", lambda: distribute_tensor(ar(5,3), m2, [Shard(1), Shard(0)]))
tryrec("dist S0 mesh2d len1", lambda: distribute_tensor(ar(4,2), m2, [Shard(0)]))
tryrec("dist S2 out of range", lambda: distribute_tensor(ar(4,2), m1, [Shard(2)]))
tryrec("dist Psum", lambda: distribute_tensor(ar(2,2), m1, [Partial()]))
# from_local
tryrec("from_local S0 no shape uneven", lambda: DTensor.from_local(torch.ones(r+1,2), m1, [Shard(0)], run_check=False))
tryrec("from_local S0 shape given", lambda: DTensor.from_local(torch.ones(2 if r<2 else (1 if r==2 else 0),2), m1, [Shard(0)], shape=torch.Size([5,2]), stride=(2,1)))
tryrec("from_local R run_check", lambda: DTensor.from_local(torch.full((2,),float(r)), m1, [Replicate()], run_check=True))
tryrec("from_local Pavg full", lambda: DTensor.from_local(torch.full((2,),float(r)), m1, [Partial("avg")]).full_tensor())
# redistribute pairs
src = ar(5,3)
P = {"S0":Shard(0),"S1":Shard(1),"R":Replicate(),"Psum":Partial(),"Pavg":Partial("avg")}
for a in P:
    for b in P:
        def f(a=a,b=b):
            if a.startswith("P"):
                d = DTensor.from_local(src*(r+1), m1, [P[a]], run_check=False)
            else:
                d = distribute_tensor(src, m1, [P[a]])
            return d.redistribute(m1, [P[b]])
        tryrec("redist 1d %s->%s"%(a,b), f)
for a,b in [(("S0","S1"),("S1","S0")),(("S0","S0"),("R","S1")),(("R","R"),("Psum","Psum")),(("S0","R"),("Psum","S1")),(("Psum","S0"),("R","R"))]:
    def f(a=a,b=b):
        if any(x.startswith("P") for x in a):
            d = DTensor.from_local(distribute_tensor(ar(4,4), m2, [Replicate() if x.startswith("P") else P[x] for x in a]).to_local()*(r+1), m2, [P[x] for x in a], run_check=False)
        else:
            d = distribute_tensor(ar(5,3), m2, [P[x] for x in a])
        return d.redistribute(m2, [P[x] for x in b])
    tryrec("redist 2d %s->%s"%(a,b), f)
# ops
x = ar(5,3)
d0 = distribute_tensor(x, m1, [Shard(0)]); d1 = distribute_tensor(x, m1, [Shard(1)]); dr = distribute_tensor(x, m1, [Replicate()])
tryrec("sum dim0 of S0", lambda: d0.sum(0))
tryrec("sum all of S0", lambda: d0.sum())
tryrec("mean dim0 of S0 (uneven)", lambda: d0.mean(0))
tryrec("mean all of S0", lambda: d0.mean())
tryrec("mean dim1 of S1", lambda: d1.mean(1))
tryrec("amax dim0 of S0", lambda: d0.amax(0))
tryrec("matmul S1@S0", lambda: distribute_tensor(ar(3,8), m1, [Shard(1)]) @ distribute_tensor(ar(8,2), m1, [Shard(0)]))
tryrec("softmax dim0 of S0", lambda: d0.softmax(0))
tryrec("softmax dim1 of S0", lambda: d0.softmax(1))
tryrec("view S0 8x3 -> 24", lambda: distribute_tensor(ar(8,3), m1, [Shard(0)]).view(24))
tryrec("view S0 8x3 -> 4,6", lambda: distribute_tensor(ar(8,3), m1, [Shard(0)]).view(4,6))
tryrec("view S1 3x8 -> 3,2,4", lambda: distribute_tensor(ar(3,8), m1, [Shard(1)]).view(3,2,4))
tryrec("reshape S0 5x3 -> 15", lambda: d0.reshape(15))
tryrec("transpose S0", lambda: d0.t())
tryrec("S0 + R", lambda: d0 + dr)
tryrec("S0 + S1", lambda: d0 + d1)
def pr():
    p = DTensor.from_local(x*(r+1), m1, [Partial()], run_check=False)
    return p + dr
tryrec("Psum + R", pr)
def pp():
    p = DTensor.from_local(x*(r+1), m1, [Partial()], run_check=False)
    return p + p
tryrec("Psum + Psum", pp)
def pm():
    p = DTensor.from_local(x*(r+1), m1, [Partial()], run_check=False)
    return p * 2
tryrec("Psum * 2", pm)
def pm2():
    p = DTensor.from_local(x*(r+1), m1, [Partial()], run_check=False)
    return p + 1
tryrec("Psum + 1", pm2)
def pneg():
    p = DTensor.from_local(x*(r+1), m1, [Partial()], run_check=False)
    return p.neg()
tryrec("neg Psum", pneg)
def pexp():
    p = DTensor.from_local(x*(r+1), m1, [Partial()], run_check=False)
    return p.abs()
tryrec("abs Psum", pexp)
def inpl():
    a = distribute_tensor(x.clone(), m1, [Shard(0)]); a.add_(dr); return a
tryrec("S0.add_(R)", inpl)
def inpl2():
    a = distribute_tensor(x.clone(), m1, [Replicate()]); a.add_(d0); return a
tryrec("R.add_(S0)", inpl2)
from torch.distributed.tensor import ones as dones, zeros as dzeros, full as dfull, randn as drandn
tryrec("ones 5x2 S0", lambda: dones(5,2, device_mesh=m1, placements=[Shard(0)]))
tryrec("full 3x2 S1", lambda: dfull((3,2), 7.0, device_mesh=m1, placements=[Shard(1)]))
tryrec("ones Psum", lambda: dones(2,2, device_mesh=m1, placements=[Partial()]))
torch.manual_seed(0)
tryrec("randn 4x2 S0 seed0", lambda: drandn(4,2, device_mesh=m1, placements=[Shard(0)]))
# autograd
def g1():
    w = distribute_tensor(ar(3,2), m1, [Replicate()]).requires_grad_()
    xi = distribute_tensor(ar(4,3), m1, [Shard(0)])
    (xi @ w).sum().backward()
    return w.grad
tryrec("grad of R param with S0 input", g1)
def g2():
    w = distribute_tensor(ar(4,3), m1, [Shard(0)]).requires_grad_()
    w.redistribute(m1, [Replicate()]).sum().backward()
    return w.grad
tryrec("grad S0->R backward", g2)
def g3():
    w = distribute_tensor(ar(5,3), m1, [Shard(0)]).requires_grad_()
    w.full_tensor().sum().backward()
    return w.grad
tryrec("grad full_tensor backward", g3)
def g4():
    l = torch.ones(2,3, requires_grad=True)
    d = DTensor.from_local(l, m1, [Shard(0)])
    (d*d).sum().backward()
    return l.grad
tryrec("grad from_local backward local", g4)
def g5():
    w = distribute_tensor(ar(4,3), m1, [Replicate()]).requires_grad_()
    w.to_local(grad_placements=[Partial()]).sum().backward()
    return w.grad
tryrec("grad to_local(grad_placements=P)", g5)
def g6():
    w = distribute_tensor(ar(4,3), m1, [Replicate()]).requires_grad_()
    w.to_local().sum().backward()
    return w.grad
tryrec("grad to_local() no grad_placements", g6)
def g7():
    w = distribute_tensor(ar(4,3), m1, [Replicate()]).requires_grad_()
    w.redistribute(m1, [Partial()]).sum().backward()
    return w.grad
tryrec("grad R->P backward", g7)
def g8():
    w = distribute_tensor(ar(4,3), m1, [Shard(0)]).requires_grad_()
    w.sum().backward()
    return w.grad
tryrec("grad of S0 sum", g8)
def g9():
    w = distribute_tensor(ar(4,3), m1, [Replicate()]).requires_grad_()
    w.redistribute(m1, [Shard(1)]).sum().backward()
    return w.grad
tryrec("grad R->S1 backward", g9)
# errors
tryrec("err mismatched mesh add", lambda: distribute_tensor(ar(4,2), m1, [Shard(0)]) + distribute_tensor(ar(4,2), m2, [Shard(0), Replicate()]))
tryrec("err placements len", lambda: distribute_tensor(ar(4,2), m1, [Shard(0), Replicate()]))
tryrec("err redistribute len", lambda: d0.redistribute(m1, [Shard(0), Replicate()]))
tryrec("err Shard(-3)", lambda: distribute_tensor(ar(4,2), m1, [Shard(-3)]))
with open("torch_r%d.json"%r,"w") as f: json.dump(out, f, indent=0)
dist.destroy_process_group()
