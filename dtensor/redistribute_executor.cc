// The redistribute executor: each planned step is exactly one collective on
// mesh.communicator(step.mesh_dim) (or one local operation). Uneven shards are padded to the
// torch.chunk size ceil(m / n) before the collective and cut back afterwards; every shape
// comes from compute_local_shape_and_offset / chunk_bounds.
#include <memory>
#include <vector>

#include "dtensor/detail/scale.h"
#include "dtensor/detail/util.h"
#include "dtensor/redistribute.h"
#include "tensor/creation.h"
#include "tensor/error.h"
#include "tensor/shape_ops.h"

namespace dtensor {
namespace {

// Shape `s` with [n] prepended.
Shape with_leading(int64_t n, IntSpan s) {
  Shape out;
  out.reserve(s.size() + 1);
  out.push_back(n);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// S(d) -> R. `full` is the size of dim d after the gather (the piece this mesh dim splits).
Tensor all_gather_dim(const Tensor& x, int64_t d, int64_t full, Communicator& comm,
                      const Shape& target_shape) {
  const int64_t n = comm.size();
  const int64_t padded = chunk_bounds(full, n, 0).size;
  const Tensor in = detail::pad_dim_to(x, d, padded).contiguous();
  Tensor buffer = empty(with_leading(n, in.shape()), TensorOptions(x.dtype(), x.device()));
  comm.all_gather(buffer, in)->wait();
  if (d == 0 && padded * n == full) return buffer.view(target_shape);
  std::vector<Tensor> pieces;
  pieces.reserve(n);
  for (int64_t k = 0; k < n; ++k) {
    pieces.push_back(buffer.select(0, k).narrow(d, 0, chunk_bounds(full, n, k).size));
  }
  return cat(pieces, d);
}

// Splits x along dim `e` into the n torch.chunk pieces, each padded to the chunk size, and
// stacks them into a contiguous [n, ...] buffer (block k goes to rank k). Dim `d` (when >= 0)
// is also padded to `d_size`.
Tensor stacked_chunks(const Tensor& x, int64_t e, int64_t n, int64_t d = -1, int64_t d_size = 0) {
  const int64_t m = x.size(e);
  const int64_t padded = chunk_bounds(m, n, 0).size;
  std::vector<Tensor> blocks;
  blocks.reserve(n);
  for (int64_t k = 0; k < n; ++k) {
    const ChunkBounds b = chunk_bounds(m, n, k);
    Tensor block = detail::pad_dim_to(x.narrow(e, b.offset, b.size), e, padded);
    if (d >= 0) block = detail::pad_dim_to(block, d, d_size);
    blocks.push_back(block);
  }
  return stack(blocks, 0);
}

// P -> S(e).
Tensor reduce_scatter_dim(const Tensor& x, int64_t e, ReduceOp op, Communicator& comm) {
  const int64_t n = comm.size();
  const int64_t m = x.size(e);
  const int64_t padded = chunk_bounds(m, n, 0).size;
  const Tensor in = (e == 0 && padded * n == m) ? x.contiguous() : stacked_chunks(x, e, n);
  Shape out_shape(x.shape().begin(), x.shape().end());
  out_shape[e] = padded;
  Tensor out = empty(out_shape, TensorOptions(x.dtype(), x.device()));
  comm.reduce_scatter(out, in, op)->wait();
  const int64_t mine = chunk_bounds(m, n, comm.rank()).size;
  return mine == padded ? out : out.narrow(e, 0, mine).contiguous();
}

// S(d) -> S(e): block k of the input is chunk k of dim e (padded), dim d padded to its chunk
// size; after the exchange block k holds rank k's chunk of dim d, and the blocks are
// concatenated along d.
Tensor all_to_all_dims(const Tensor& x, int64_t d, int64_t e, int64_t full_d, Communicator& comm) {
  const int64_t n = comm.size();
  const int64_t padded_d = chunk_bounds(full_d, n, 0).size;
  const Tensor in = stacked_chunks(x, e, n, d, padded_d);
  Tensor out = empty(in.shape(), TensorOptions(x.dtype(), x.device()));
  comm.all_to_all(out, in)->wait();
  const int64_t mine_e = chunk_bounds(x.size(e), n, comm.rank()).size;
  std::vector<Tensor> pieces;
  pieces.reserve(n);
  for (int64_t k = 0; k < n; ++k) {
    pieces.push_back(
        out.select(0, k).narrow(d, 0, chunk_bounds(full_d, n, k).size).narrow(e, 0, mine_e));
  }
  return cat(pieces, d);
}

Tensor run_step(const Tensor& x, const RedistributeStep& step, const DeviceMesh& mesh,
                const Shape& target_shape) {
  const CommunicatorPtr& comm_ptr = mesh.communicator(step.mesh_dim);
  DT_CHECK(comm_ptr != nullptr, "[redistribute] no communicator for mesh dim %d on this rank",
           step.mesh_dim);
  Communicator& comm = *comm_ptr;
  switch (step.kind) {
    case StepKind::kAllGather:
      return all_gather_dim(x, step.src.dim(), target_shape[step.src.dim()], comm, target_shape);
    case StepKind::kAllReduce: {
      Tensor y = x.clone();
      comm.all_reduce(y, step.src.reduce_op())->wait();
      return y;
    }
    case StepKind::kReduceScatter:
      return reduce_scatter_dim(x, step.dst.dim(), step.src.reduce_op(), comm);
    case StepKind::kAllToAll:
      return all_to_all_dims(x, step.src.dim(), step.dst.dim(), target_shape[step.src.dim()], comm);
    case StepKind::kLocalChunk: {
      const ChunkBounds b = chunk_bounds(x.size(step.dst.dim()), comm.size(), comm.rank());
      return x.narrow(step.dst.dim(), b.offset, b.size).clone();
    }
    case StepKind::kPartition:
      if (step.dst.reduce_op() == ReduceOp::kSum && comm.rank() != 0) return zeros_like(x);
      return x;
    case StepKind::kRescalePartial:
      // P(sum) -> P(avg): the mean of the locals must equal their old sum, so multiply by n;
      // P(avg) -> P(sum): divide by n.
      return detail::scaled_by_mesh_size(x, comm.size(), step.src.reduce_op() == ReduceOp::kAvg);
  }
  DT_FAIL("[redistribute] unknown step kind %d", static_cast<int>(step.kind));
}

}  // namespace

Tensor redistribute_local(const Tensor& local, const DTensorSpec& src, const DTensorSpec& dst) {
  const RedistributePlan& plan = plan_redistribute(src, dst);
  const DeviceMesh& mesh = src.mesh();
  if (!mesh.contains_me()) {
    return detail::empty_local(dst.ndim(), dst.dtype(), detail::mesh_device(mesh, local));
  }
  const Shape& coord = mesh.get_coordinate();
  const LocalShard expected = src.local_shard(coord);
  DT_CHECK(local.shape() == expected.shape && local.dtype() == src.dtype(),
           "[redistribute] local shard is %s %s but %s implies %s %s on coordinate %s",
           shape_str(local.shape()), dtype_name(local.dtype()), src.str(),
           shape_str(expected.shape), dtype_name(src.dtype()), shape_str(coord));
  Placements state = src.placements();
  Tensor x = local;
  for (const RedistributeStep& step : plan.steps) {
    state[step.mesh_dim] = step.dst;
    const Shape target_shape =
        compute_local_shape_and_offset(src.shape(), mesh.shape(), coord, state).shape;
    x = run_step(x, step, mesh, target_shape);
    DT_CHECK(x.shape() == target_shape,
             "[redistribute] internal error: step %s produced a local shard of shape %s, "
             "expected %s",
             step_kind_name(step.kind), shape_str(x.shape()), shape_str(target_shape));
  }
  return x;
}

DTensor redistribute(const DTensor& t, const DTensorSpec& dst) {
  DT_CHECK(t.defined(), "[redistribute] the DTensor is undefined (expected a DTensor)");
  if (t.spec() == dst) return t;
  Tensor local = redistribute_local(t.to_local(), t.spec(), dst);
  return DTensor(std::move(local), std::make_shared<const DTensorSpec>(dst));
}

}  // namespace dtensor
