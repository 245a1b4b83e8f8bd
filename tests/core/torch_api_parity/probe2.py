# PyTorch half of the DTensor API probe (see probe.cc); run with torchrun --nproc_per_node 4.
import os
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'common.py')).read())
x = ar(5,3)
dr = distribute_tensor(x, m1, [Replicate()])
def PS(): return DTensor.from_local(x*(r+1), m1, [Partial()], run_check=False)
def PA(): return DTensor.from_local(x*(r+1), m1, [Partial("avg")], run_check=False)
def PMX(): return DTensor.from_local(x*(r+1), m1, [Partial("max")], run_check=False)
cases = {
 "Pavg + 1": lambda: PA() + 1,
 "Pavg * 2": lambda: PA() * 2,
 "Pavg + R": lambda: PA() + dr,
 "Pavg * R": lambda: PA() * dr,
 "Psum * R": lambda: PS() * dr,
 "Psum - R": lambda: PS() - dr,
 "R - Psum": lambda: dr - PS(),
 "Psum / R+1": lambda: PS() / (dr + 1),
 "Psum + Pavg": lambda: PS() + PA(),
 "Psum * Psum": lambda: PS() * PS(),
 "Pavg + Pavg": lambda: PA() + PA(),
 "Pmax + R": lambda: PMX() + dr,
 "Pmax * 2": lambda: PMX() * 2,
 "Pmax * -1": lambda: PMX() * -1,
 "neg Pmax": lambda: -PMX(),
 "Pmax full": lambda: DTensor.from_local(PMX().full_tensor(), m1, [Replicate()]),
 "sum Pavg dim0": lambda: PA().sum(0),
 "mean Psum dim0": lambda: PS().mean(0),
 "Pavg @ R": lambda: PA() @ distribute_tensor(ar(3,2), m1, [Replicate()]),
 "Pavg @ Pavg.T": lambda: PA() @ PA().t(),
 "Psum @ Psum.T": lambda: PS() @ PS().t(),
 "Pavg int full": lambda: DTensor.from_local(DTensor.from_local(torch.tensor([r, 2*r+1]), m1, [Partial("avg")]).full_tensor(), m1, [Replicate()]),
 "Psum.add_(R)": lambda: PS().add_(dr),
 "Psum.add_(1)": lambda: PS().add_(1),
 "Pavg.add_(1)": lambda: PA().add_(1),
 "Psum.mul_(2)": lambda: PS().mul_(2),
 "mean 2d S0S0 7x2 dim0": lambda: distribute_tensor(ar(7,2), m2, [Shard(0), Shard(0)]).mean(0),
 "mean 2d S0S1 5x3 all": lambda: distribute_tensor(ar(5,3), m2, [Shard(0), Shard(1)]).mean(),
 "cumsum S0 dim0": lambda: distribute_tensor(x, m1, [Shard(0)]).cumsum(0),
 "var S0 dim0": lambda: distribute_tensor(x, m1, [Shard(0)]).var(0),
 "S0 2d 7x2 -> S1S0 ": lambda: distribute_tensor(ar(7,2), m2, [Shard(0), Shard(0)]).redistribute(m2, [Shard(1), Shard(0)]),
 "S0S0 7x6 -> S1S1": lambda: distribute_tensor(ar(7,6), m2, [Shard(0), Shard(0)]).redistribute(m2, [Shard(1), Shard(1)]),
 "S1S0 5x3 -> S0S1": lambda: distribute_tensor(ar(5,3), m2, [Shard(1), Shard(0)]).redistribute(m2, [Shard(0), Shard(1)]),
 "Pavg->S0": lambda: PA().redistribute(m1, [Shard(0)]),
 "Pmax->S1": lambda: PMX().redistribute(m1, [Shard(1)]),
 "from_local S0 run_check uneven ok": lambda: DTensor.from_local(torch.ones(2 if r<2 else (1 if r==2 else 0),2), m1, [Shard(0)], run_check=True, shape=torch.Size([5,2]), stride=(2,1)),
 "2d Psum,S0 full": lambda: DTensor.from_local(DTensor.from_local(torch.ones(1,2)*(r+1), m2, [Partial(), Shard(0)]).full_tensor(), m2, [Replicate(), Replicate()]),
 "2d R,Pavg full": lambda: DTensor.from_local(DTensor.from_local(torch.ones(2)*(r+1), m2, [Replicate(), Partial("avg")]).full_tensor(), m2, [Replicate(), Replicate()]),
}
def grads():
    def g(name, f):
        try: rec(name, f())
        except Exception as e: out.append(dict(case=name, error=type(e).__name__+": "+str(e)[:150]))
    def a():
        w = distribute_tensor(ar(3,2), m2, [Replicate(), Replicate()]).requires_grad_()
        xi = distribute_tensor(ar(4,3), m2, [Shard(0), Replicate()])
        (xi @ w).sum().backward(); return w.grad
    g("grad 2d R param S0 input", a)
    def b():
        w = distribute_tensor(ar(5,3), m1, [Shard(0)]).requires_grad_()
        w.mean().backward(); return w.grad
    g("grad mean of S0 uneven", b)
    def c():
        w = distribute_tensor(ar(5,3), m1, [Replicate()]).requires_grad_()
        PA_ = DTensor.from_local(x*(r+1), m1, [Partial("avg")])
        (w*PA_).sum().backward(); return w.grad
    g("grad R * Pavg", c)
    def d():
        w = distribute_tensor(ar(5,3), m1, [Shard(0)]).requires_grad_()
        w.redistribute(m1, [Shard(1)]).sum().backward(); return w.grad
    g("grad S0->S1 backward", d)
    def e():
        w = distribute_tensor(ar(4,4), m1, [Replicate()]).requires_grad_()
        w.redistribute(m1, [Partial("avg")]).full_tensor().sum().backward(); return w.grad
    g("grad R->Pavg full backward", e)
    def f():
        w = distribute_tensor(ar(5,3), m1, [Shard(0)]).requires_grad_()
        (w.softmax(0) * distribute_tensor(ar(5,3), m1, [Replicate()])).sum().backward(); return w.grad
    g("grad softmax S0 dim0", f)
for k,f in cases.items(): tryrec(k, f)
grads()
with open("torch2_r%d.json"%r,"w") as f: json.dump(out, f, indent=0)
dist.destroy_process_group()
