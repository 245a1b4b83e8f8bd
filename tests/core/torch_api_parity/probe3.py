# PyTorch half of the DTensor API probe (see probe.cc); run with torchrun --nproc_per_node 4.
import os
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'common.py')).read())
x = ar(5,3)
def P2(a, b, t=None):
    t = ar(4,4) if t is None else t
    return DTensor.from_local(t*(r+1), m2, [a, b], run_check=False)
cases = {
 "2d Pavg,Psum -> R,R": lambda: P2(Partial("avg"), Partial()).redistribute(m2, [Replicate(), Replicate()]),
 "2d Pavg,Psum -> S0,S1": lambda: P2(Partial("avg"), Partial()).redistribute(m2, [Shard(0), Shard(1)]),
 "2d Psum,Pavg -> S1,S1": lambda: P2(Partial(), Partial("avg")).redistribute(m2, [Shard(1), Shard(1)]),
 "2d Pmax,Pmin -> R,R": lambda: P2(Partial("max"), Partial("min")).redistribute(m2, [Replicate(), Replicate()]),
 "2d Pmin,R -> S0,R": lambda: P2(Partial("min"), Replicate()).redistribute(m2, [Shard(0), Replicate()]),
 "2d Psum,Psum 5x3 -> S0,S0": lambda: P2(Partial(), Partial(), ar(5,3)).redistribute(m2, [Shard(0), Shard(0)]),
 "2d Pavg,R 5x3 -> S0,S0": lambda: P2(Partial("avg"), Replicate(), ar(5,3)).redistribute(m2, [Shard(0), Shard(0)]),
 "2d S(-1),S0 5x3": lambda: distribute_tensor(ar(5,3), m2, [Shard(-1), Shard(0)]),
 "S1 of 3x1": lambda: distribute_tensor(ar(3,1), m1, [Shard(1)]),
 "2d S1S0 3x5 -> R,R": lambda: distribute_tensor(ar(3,5), m2, [Shard(1), Shard(0)]).redistribute(m2, [Replicate(), Replicate()]),
 "2d S0S0 5x2 -> S0,R": lambda: distribute_tensor(ar(5,2), m2, [Shard(0), Shard(0)]).redistribute(m2, [Shard(0), Replicate()]),
 "2d S0S0 5x2 -> R,S0": lambda: distribute_tensor(ar(5,2), m2, [Shard(0), Shard(0)]).redistribute(m2, [Replicate(), Shard(0)]),
 "2d R,S0 5x2 -> S0,S0": lambda: distribute_tensor(ar(5,2), m2, [Replicate(), Shard(0)]).redistribute(m2, [Shard(0), Shard(0)]),
 "2d S0,R 5x2 -> S0,S0": lambda: distribute_tensor(ar(5,2), m2, [Shard(0), Replicate()]).redistribute(m2, [Shard(0), Shard(0)]),
 "2d S0,S1 5x3 -> S1,S0": lambda: distribute_tensor(ar(5,3), m2, [Shard(0), Shard(1)]).redistribute(m2, [Shard(1), Shard(0)]),
 "matmul S1@S0 K=5": lambda: distribute_tensor(ar(3,5), m1, [Shard(1)]) @ distribute_tensor(ar(5,2), m1, [Shard(0)]),
 "Psum @ R": lambda: DTensor.from_local(x*(r+1), m1, [Partial()]) @ distribute_tensor(ar(3,2), m1, [Replicate()]),
 "R @ Psum": lambda: distribute_tensor(ar(2,5), m1, [Replicate()]) @ DTensor.from_local(x*(r+1), m1, [Partial()]),
 "2d sum dim0 S0,S1": lambda: distribute_tensor(ar(5,3), m2, [Shard(0), Shard(1)]).sum(0),
 "2d mean dim1 keepdim S0,S1": lambda: distribute_tensor(ar(5,3), m2, [Shard(0), Shard(1)]).mean(1, keepdim=True),
 "2d softmax dim1 S0,S1": lambda: distribute_tensor(ar(5,3), m2, [Shard(0), Shard(1)]).softmax(1),
 "Pavg int neg full": lambda: DTensor.from_local(DTensor.from_local(torch.tensor([-3 if r==0 else 0, 5 if r==0 else 0]), m1, [Partial("avg")]).full_tensor(), m1, [Replicate()]),
 "Pavg.sum() S": lambda: DTensor.from_local(x*(r+1), m1, [Partial("avg")]).sum(),
 "S0 * S0 other mesh dim 2d": lambda: distribute_tensor(ar(4,4), m2, [Shard(0), Replicate()]) * distribute_tensor(ar(4,4), m2, [Replicate(), Shard(0)]),
}
for k,f in cases.items():
    print(r, "CASE", k, flush=True); tryrec(k, f)
def g(name, f):
    try: rec(name, f())
    except Exception as e: out.append(dict(case=name, error=type(e).__name__+": "+str(e)[:150]))
def a():
    w = distribute_tensor(ar(4,3), m1, [Replicate()]).requires_grad_()
    l = w.to_local(grad_placements=[Shard(0)])
    (l * (r+1)).sum().backward(); return w.grad
g("grad to_local R grad_placements S0", a)
def b():
    l = distribute_tensor(ar(4,3), m1, [Shard(0)]).requires_grad_()
    d = DTensor.from_local(l.to_local(), m1, [Shard(0)])
    return d
def c():
    w = distribute_tensor(ar(5,3), m2, [Shard(0), Shard(1)]).requires_grad_()
    (w.redistribute(m2, [Replicate(), Replicate()]) * distribute_tensor(ar(5,3), m2, [Replicate(), Replicate()])).sum().backward(); return w.grad
g("grad 2d S0S1 -> RR backward", c)
def d():
    w = distribute_tensor(ar(5,3), m1, [Shard(0)]).requires_grad_()
    w.full_tensor().pow(2).sum().backward(); return w.grad
g("grad full_tensor pow2", d)
with open("torch3_r%d.json"%r,"w") as f: json.dump(out, f, indent=0)
dist.destroy_process_group()
