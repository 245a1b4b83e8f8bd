# PyTorch 2.15's local_map on 2 gloo ranks: the behaviours docs/SEMANTICS.md ("local_map") cites and
# tests/parallel/test_local_map_mpi.cc mirrors. Not a test; run by hand:
#   /root/venv/bin/torchrun --nproc_per_node 2 tests/parallel/local_map_torch_probe.py
# Output measured (2026-11-29, per rank r):
#   r default grad placements (Replicate(),) equals own term: True
#   r ValueError arg DTensor(...) in local_map has a mismatched placements ...
#   0 uneven out shape (6, 3) local (3, 3)   /   1 uneven out shape (4, 3) local (2, 3)
# i.e. a Replicate input's gradient defaults to Replicate (each rank keeps its own term), a
# placement mismatch is a ValueError, and an uneven Shard output gets a different (wrong) global
# shape on each rank (dtensor infers the true shape from every rank's local size, or takes out_shapes).
import torch, torch.distributed as dist
from torch.distributed.tensor import distribute_tensor, Shard, Replicate, Partial, init_device_mesh
from torch.distributed.tensor.experimental import local_map
dist.init_process_group("gloo")
r = dist.get_rank(); n = dist.get_world_size()
mesh = init_device_mesh("cpu", (n,))
torch.manual_seed(0)
x = torch.randn(2, 3, dtype=torch.float64); w = torch.randn(2 * n, 3, dtype=torch.float64)
xd = distribute_tensor(x, mesh, [Replicate()]).requires_grad_()
wd = distribute_tensor(w, mesh, [Shard(0)]).requires_grad_()
f = local_map(lambda a, b: a @ b.t(), out_placements=[Shard(1)], in_placements=([Replicate()], [Shard(0)]), device_mesh=mesh)
f(xd, wd).sum().backward()
mine = w[2 * r:2 * r + 2].sum(0, keepdim=True).expand(2, 3)
print(r, "default grad placements", xd.grad.placements, "equals own term:", torch.allclose(xd.grad.to_local(), mine))
try:
    f(distribute_tensor(x, mesh, [Shard(0)]), wd)
except Exception as e:
    print(r, type(e).__name__, str(e)[:80])
# uneven output shape
g = local_map(lambda a: a * 2, out_placements=[Shard(0)], in_placements=([Shard(0)],), device_mesh=mesh)
y = g(distribute_tensor(torch.randn(2 * n + 1, 3), mesh, [Shard(0)]))
print(r, "uneven out shape", tuple(y.shape), "local", tuple(y.to_local().shape))
dist.destroy_process_group()
