# PyTorch half of the DTensor API probe (see probe.cc); run with torchrun --nproc_per_node 4.
import os
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'common.py')).read())
def g(name, f):
    try: rec(name, f())
    except Exception as e: out.append(dict(case=name, error=type(e).__name__+": "+str(e)[:150]))
def lf(shape, scale=1.0):
    return (ar(*shape)*scale + r).requires_grad_()
def a():
    l = lf((2,3)); d = DTensor.from_local(l, m1, [Shard(0)]); (d*d).sum().backward()
    return DTensor.from_local(l.grad, m1, [Replicate()], run_check=False)
g("from_local S0 local grad", a)
def b():
    l = lf((2,3)); d = DTensor.from_local(l, m1, [Partial()]); (d*distribute_tensor(ar(2,3), m1, [Replicate()])).sum().backward()
    return DTensor.from_local(l.grad, m1, [Replicate()], run_check=False)
g("from_local Psum local grad", b)
def c():
    l = lf((2,3)); d = DTensor.from_local(l, m1, [Partial("avg")]); (d*distribute_tensor(ar(2,3), m1, [Replicate()])).sum().backward()
    return DTensor.from_local(l.grad, m1, [Replicate()], run_check=False)
g("from_local Pavg local grad", c)
def d():
    l = lf((2,3)); dd = DTensor.from_local(l, m1, [Replicate()]); (dd*dd).sum().backward()
    return DTensor.from_local(l.grad, m1, [Replicate()], run_check=False)
g("from_local R local grad", d)
def e():
    w = distribute_tensor(ar(5,3), m1, [Shard(0)]).requires_grad_()
    w.redistribute(m1, [Partial()]).full_tensor().pow(2).sum().backward(); return w.grad
g("grad S0->Psum->full pow2", e)
def f():
    w = distribute_tensor(ar(5,3), m2, [Shard(0), Shard(0)]).requires_grad_()
    (w.redistribute(m2, [Shard(1), Replicate()]) ** 2).sum().backward(); return w.grad
g("grad 2d S0S0->S1R pow2", f)
def h():
    w = distribute_tensor(ar(5,3), m1, [Replicate()]).requires_grad_()
    (w.redistribute(m1, [Shard(0)]).to_local() ** 2).sum().backward(); return w.grad
g("grad R->S0 to_local pow2", h)
def i():
    w = distribute_tensor(ar(5,3), m1, [Shard(1)]).requires_grad_()
    (w.to_local(grad_placements=[Shard(1)]) * (r+1)).sum().backward(); return w.grad
g("grad S1 to_local scaled", i)
def j():
    w = distribute_tensor(ar(4,3), m2, [Shard(0), Replicate()]).requires_grad_()
    (w.full_tensor() * ar(4,3)).sum().backward(); return w.grad
g("grad 2d S0R full_tensor", j)
def k():
    w = distribute_tensor(ar(5,4), m1, [Shard(1)]).requires_grad_()
    (w.mean(1) * distribute_tensor(ar(5)+1, m1, [Replicate()])).sum().backward(); return w.grad
g("grad mean dim1 of S1", k)
with open("torch4_r%d.json"%r,"w") as fo: json.dump(out, fo, indent=0)
dist.destroy_process_group()
