// The redistribute executor: each planned step is exactly one collective on
// mesh.communicator(step.mesh_dim), or on the flattened communicator of a flattened step's mesh
// dims (or one local operation). Uneven shards are padded to the
// torch.chunk size ceil(m / n) before the collective and cut back afterwards (except a gather
// along a non-leading dim on a backend that places each piece itself: no padding at all); every
// shape comes from compute_local_shape_and_offset / chunk_bounds.
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <array>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "dtensor/core/check_ranks.h"
#include "dtensor/core/detail/captured_move.h"
#include "dtensor/core/detail/chunks.h"
#include "dtensor/core/detail/log.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/core/detail/scale.h"
#include "dtensor/core/detail/util.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor {
namespace {

using detail::block_buffer;
using detail::pack_chunks;
using detail::unpack_chunks;
using detail::unpack_is_view;
using detail::zero_tail;

// Output size from which a gather along a non-leading dim goes straight into its place
// (Communicator::all_gather_into_dim for one mesh dim, all_gather_into_regions for several: no
// padded buffer, no copy afterwards). Below it the contiguous gather plus one copy is as fast:
// the gather's fixed cost (a subarray datatype per piece) is then what counts. Measured with
// bench_redistribute (4 ranks on the 2-core machine, the MPI backend's blocking MPI_Alltoallw,
// two rounds alternating the bound): S(1)->R and [S(0),S(1)]->[R,R] placed straight 1.1-1.3x
// faster at 256 KB, 1.5-1.7x at 1 MB and equal to 1.05x at 4 MB; equal (within noise) from
// 4 KB to 64 KB. The bound was 4 MB while the
// backend posted the nonblocking MPI_Ialltoallw (then: equal to 15% faster at 1 MB).
constexpr size_t kGatherIntoDimMinBytes = size_t{256} << 10;

// S(d) -> R. `full` is the size of dim d after the gather (the piece this mesh dim splits).
// A padded or non-contiguous input is written straight into this rank's block of the gather
// buffer (the collective then runs in place) instead of into a padded copy first. A large
// gather along a non-leading dim whose other dims are already the target's goes straight into
// place where the backend can do it.
Tensor all_gather_dim(const Tensor& x, int64_t d, int64_t full, Communicator& comm,
                      const Shape& target_shape) {
  const int64_t n = comm.size();
  const int64_t padded = chunk_bounds(full, n, 0).size;
  Shape block_shape(x.shape().begin(), x.shape().end());
  block_shape[d] = padded;
  // From the target shape, not x: every rank of the communicator must take the same path, and
  // x may be an empty shard on some of them.
  size_t out_bytes = x.itemsize();
  for (int64_t s : target_shape) out_bytes *= static_cast<size_t>(s);
  if (out_bytes >= kGatherIntoDimMinBytes && !unpack_is_view(block_shape, d, target_shape) &&
      comm.supports_regions(x.device()) && target_shape.size() == x.shape().size()) {
    bool others_match = true;
    for (size_t j = 0; j < target_shape.size(); ++j) {
      if (static_cast<int64_t>(j) != d && target_shape[j] != x.size(static_cast<int64_t>(j))) {
        others_match = false;
      }
    }
    if (others_match && target_shape[d] == full) {
      std::vector<int64_t> sizes(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) sizes[static_cast<size_t>(k)] = chunk_bounds(full, n, k).size;
      Tensor out = empty(target_shape, TensorOptions(x.dtype(), x.device()));
      comm.all_gather_into_dim(out, x.contiguous(), d, sizes)->wait();
      return out;
    }
  }
  Tensor buffer = block_buffer(n, block_shape, x, !unpack_is_view(block_shape, d, target_shape));
  Tensor in = x;
  if (x.size(d) != padded || !x.is_contiguous()) {
    in = buffer.select(0, comm.rank());
    zero_tail(in, d, x.size(d));
    if (x.numel() > 0) in.narrow(d, 0, x.size(d)).copy_(x);
  }
  comm.all_gather(buffer, in)->wait();
  return unpack_chunks(buffer, d, full, target_shape);
}

// P -> S(e).
Tensor reduce_scatter_dim(const Tensor& x, int64_t e, ReduceOp op, Communicator& comm) {
  const int64_t n = comm.size();
  const int64_t m = x.size(e);
  const int64_t padded = chunk_bounds(m, n, 0).size;
  const Tensor in = pack_chunks(x, e, n);
  Shape out_shape(x.shape().begin(), x.shape().end());
  out_shape[e] = padded;
  Tensor out = empty(out_shape, TensorOptions(x.dtype(), x.device()));
  comm.reduce_scatter(out, in, op)->wait();
  const int64_t mine = chunk_bounds(m, n, comm.rank()).size;
  return mine == padded ? out : out.narrow(e, 0, mine).contiguous();
}

// An all-to-all by regions where the backend places them itself (Communicator::
// all_to_all_regions): region k of x (`sent`, offsets relative to x) goes to rank k of `comm`,
// and rank k's piece lands in region k of a fresh tensor of `target_shape` (`received`). No
// packing, no padding, no unpacking: one pass over the data fewer on each side than packed
// blocks (MPI copies strided pieces into and out of its shared-memory fragments anyway).
Tensor exchange_regions(const Tensor& x, const std::vector<LocalShard>& sent,
                        const std::vector<LocalShard>& received, const Shape& target_shape,
                        Communicator& comm) {
  std::vector<Shape> send_offsets, send_shapes, recv_offsets, recv_shapes;
  for (auto [from, offsets, shapes] : {std::tuple{&sent, &send_offsets, &send_shapes},
                                       std::tuple{&received, &recv_offsets, &recv_shapes}}) {
    offsets->reserve(from->size());
    shapes->reserve(from->size());
    for (const LocalShard& b : *from) {
      offsets->push_back(b.offset);
      shapes->push_back(b.shape);
    }
  }
  Tensor out = empty(target_shape, TensorOptions(x.dtype(), x.device()));
  comm.all_to_all_regions(out, x.contiguous(), send_offsets, send_shapes, recv_offsets, recv_shapes)
      ->wait();
  return out;
}

// S(d) -> S(e): block k of the input is chunk k of dim e (padded), dim d padded to its chunk
// size; after the exchange block k holds rank k's chunk of dim d, and the blocks are joined
// along d. Where the backend places regions itself, chunk k of dim e goes straight to rank k
// and rank k's chunk of dim d straight to its place.
Tensor all_to_all_dims(const Tensor& x, int64_t d, int64_t e, int64_t full_d, Communicator& comm,
                       const Shape& target_shape) {
  const int64_t n = comm.size();
  if (comm.supports_regions(x.device())) {
    std::vector<LocalShard> sent, received;
    sent.reserve(static_cast<size_t>(n));
    received.reserve(static_cast<size_t>(n));
    const Shape zero(x.shape().size(), 0);
    for (int64_t k = 0; k < n; ++k) {
      const ChunkBounds to = chunk_bounds(x.size(e), n, k);
      LocalShard s{Shape(x.shape().begin(), x.shape().end()), zero};
      s.shape[e] = to.size;
      s.offset[e] = to.offset;
      sent.push_back(std::move(s));
      const ChunkBounds from = chunk_bounds(full_d, n, k);
      LocalShard r{target_shape, zero};
      r.shape[d] = from.size;
      r.offset[d] = from.offset;
      received.push_back(std::move(r));
    }
    return exchange_regions(x, sent, received, target_shape, comm);
  }
  const int64_t padded_d = chunk_bounds(full_d, n, 0).size;
  const Tensor in = pack_chunks(x, e, n, d, padded_d);
  const Shape block_shape(in.shape().begin() + 1, in.shape().end());
  Tensor out = block_buffer(n, block_shape, x, !unpack_is_view(block_shape, d, target_shape));
  comm.all_to_all(out, in)->wait();
  return unpack_chunks(out, d, full_d, target_shape);
}

// P -> R. `x_is_intermediate`: x is an intermediate of this redistribute (not the caller's
// tensor), so it may be reduced in place; otherwise the result goes to a fresh buffer.
Tensor all_reduce_out(const Tensor& x, ReduceOp op, Communicator& comm, bool x_is_intermediate) {
  if (x_is_intermediate && x.is_contiguous()) {
    comm.all_reduce(x, op)->wait();
    return x;
  }
  Tensor y = empty(x.shape(), TensorOptions(x.dtype(), x.device()));
  comm.all_reduce(y, x.contiguous(), op)->wait();
  return y;
}

// What a step needs to know besides its input: where this rank sits and the placements on
// both sides of the step.
struct StepContext {
  IntSpan global_shape;
  const DeviceMesh& mesh;
  const Shape& coord;
  const Placements& before;
  const Placements& after;
  const Shape& target_shape;  // this rank's shard after the step
};

// A region of `t` starting at `offset` with `shape` (a view).
Tensor region(const Tensor& t, IntSpan offset, IntSpan shape) {
  return box_view(t, Shape(shape.size(), 0), offset, shape);
}

// The mesh coordinates of the ranks of a flattened step's group in the order of its
// communicator: row-major over step.flat_dims, this rank's coordinate on the other dims.
std::vector<Shape> group_coords(const RedistributeStep& step, const StepContext& c,
                                const Communicator& comm) {
  Shape group_shape;
  for (int64_t d : step.flat_dims) group_shape.push_back(c.mesh.size(d));
  const int64_t n = shape_numel(group_shape);
  std::vector<Shape> coords;
  coords.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    Shape coord = c.coord;
    int64_t rest = k;
    for (size_t j = step.flat_dims.size(); j-- > 0;) {
      coord[step.flat_dims[j]] = rest % group_shape[j];
      rest /= group_shape[j];
    }
    coords.push_back(std::move(coord));
  }
  DT_CHECK(n == comm.size() && coords[static_cast<size_t>(comm.rank())] == c.coord,
           "[redistribute] internal error: rank %d of the flattened communicator over mesh dims "
           "%s (of %d ranks) is not the group's rank at coordinate %s",
           comm.rank(), absl::StrJoin(step.flat_dims, "+"), comm.size(), shape_str(c.coord));
  return coords;
}

// Whether the n blocks (each of shape blocks[k].shape, at blocks[k].offset in a piece of shape
// `whole`) are equal slabs of dim 0 in order, each of shape `block`, that make up `whole`: then
// a contiguous [n, block...] buffer is `whole` itself.
bool blocks_are_slabs(const std::vector<LocalShard>& blocks, const Shape& block,
                      const Shape& whole) {
  if (block.empty() || block.size() != whole.size()) return false;
  if (static_cast<int64_t>(blocks.size()) * block[0] != whole[0]) return false;
  for (size_t d = 1; d < block.size(); ++d) {
    if (block[d] != whole[d]) return false;
  }
  for (size_t k = 0; k < blocks.size(); ++k) {
    const LocalShard& b = blocks[k];
    if (b.shape != block || b.offset[0] != static_cast<int64_t>(k) * block[0]) return false;
    for (size_t d = 1; d < b.offset.size(); ++d) {
      if (b.offset[d] != 0) return false;
    }
  }
  return true;
}

// Several mesh dims S -> R in one all-gather over their flattened communicator: block k is the
// shard of the rank whose coordinate along the flattened dims is the k-th in row-major order
// (this rank's coordinate on the other dims), padded to the largest block; each block then
// goes to its place in this rank's new shard, found by the shard math itself, so nested
// ([S(0), S(0)]), uneven and empty shards need no case of their own. When the blocks are equal
// slabs of dim 0 in rank order the gather buffer is the result (no copy); a large output is
// gathered straight into place (no buffer either).
Tensor all_gather_flat(const Tensor& x, const RedistributeStep& step, const StepContext& c,
                       Communicator& comm) {
  const int64_t n = comm.size();
  const LocalShard after =
      compute_local_shape_and_offset(c.global_shape, c.mesh.shape(), c.coord, c.after);
  std::vector<LocalShard> blocks;
  blocks.reserve(static_cast<size_t>(n));
  Shape max_block(x.shape().size(), 0);
  for (const Shape& coord : group_coords(step, c, comm)) {
    blocks.push_back(
        compute_local_shape_and_offset(c.global_shape, c.mesh.shape(), coord, c.before));
    for (size_t d = 0; d < max_block.size(); ++d) {
      max_block[d] = std::max(max_block[d], blocks.back().shape[d]);
      blocks.back().offset[d] -= after.offset[d];  // relative to this rank's new shard
    }
  }
  const bool slabs = blocks_are_slabs(blocks, max_block, c.target_shape);
  // A large output with blocks that are not slabs: each block straight into its place (one
  // subarray datatype per block on MPI; see kGatherIntoDimMinBytes), no buffer, no copy.
  const size_t out_bytes = static_cast<size_t>(shape_numel(c.target_shape)) * x.itemsize();
  if (!slabs && out_bytes >= kGatherIntoDimMinBytes && comm.supports_regions(x.device())) {
    std::vector<Shape> offsets, shapes;
    offsets.reserve(blocks.size());
    shapes.reserve(blocks.size());
    for (LocalShard& b : blocks) {
      offsets.push_back(std::move(b.offset));
      shapes.push_back(std::move(b.shape));
    }
    Tensor out = empty(c.target_shape, TensorOptions(x.dtype(), x.device()));
    comm.all_gather_into_regions(out, x.contiguous(), offsets, shapes)->wait();
    return out;
  }
  Tensor buffer = block_buffer(n, max_block, x, /*scratch=*/!slabs);
  Tensor in = x;
  if (x.shape() != max_block || !x.is_contiguous()) {
    in = buffer.select(0, comm.rank());
    if (x.shape() != max_block) in.zero_();  // padding: never read, but kept deterministic
    if (x.numel() > 0) region(in, Shape(x.shape().size(), 0), x.shape()).copy_(x);
  }
  comm.all_gather(buffer, in)->wait();
  if (slabs) return buffer.view(c.target_shape);
  Tensor out = empty(c.target_shape, TensorOptions(x.dtype(), x.device()));
  const Shape zero(max_block.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    const LocalShard& b = blocks[static_cast<size_t>(k)];
    if (shape_numel(b.shape) == 0) continue;
    region(out, b.offset, b.shape).copy_(region(buffer.select(0, k), zero, b.shape));
  }
  return out;
}

// The block every piece of a packed exchange is padded to: per dim, the longest overlap of any
// rank's interval before with any rank's interval after (distinct intervals only: most repeat
// across the group). Every rank of the group computes it alike.
Shape padded_block(const std::vector<LocalShard>& before, const std::vector<LocalShard>& after) {
  const size_t ndim = before.front().shape.size();
  Shape block(ndim, 0);
  for (size_t d = 0; d < ndim; ++d) {
    std::vector<std::pair<int64_t, int64_t>> from, to;  // [lo, hi)
    for (size_t k = 0; k < before.size(); ++k) {
      from.emplace_back(before[k].offset[d], before[k].offset[d] + before[k].shape[d]);
      to.emplace_back(after[k].offset[d], after[k].offset[d] + after[k].shape[d]);
    }
    for (auto* v : {&from, &to}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    for (const auto& [alo, ahi] : from) {
      for (const auto& [blo, bhi] : to) {
        block[d] = std::max(block[d], std::min(ahi, bhi) - std::max(alo, blo));
      }
    }
  }
  return block;
}

// Several mesh dims S -> S in one all-to-all over their flattened communicator, by boxes: the
// piece sent to rank k of the group is the part of this rank's shard that rank k holds after
// the step (the intersection of the two shards' boxes), the piece received from rank k the part
// of rank k's shard this rank holds after; so nested ([S(0), S(0)]), uneven and empty shards,
// and any mix of tensor dims, need no case of their own. The planner only flattens groups whose
// shards before and after tile the same region (flat_exchange_ok), so every element arrives
// exactly once. Where the backend places regions itself the pieces go straight from x to
// their place; otherwise they are packed into blocks padded to padded_block(), with the input
// sent as it is when its pieces are equal slabs of dim 0 in order, and the receive buffer
// returned as the result when the received pieces are.
Tensor all_to_all_flat(const Tensor& x, const RedistributeStep& step, const StepContext& c,
                       Communicator& comm) {
  const int64_t n = comm.size();
  const size_t ndim = x.shape().size();
  std::vector<LocalShard> before, after;
  before.reserve(static_cast<size_t>(n));
  after.reserve(static_cast<size_t>(n));
  for (const Shape& coord : group_coords(step, c, comm)) {
    before.push_back(
        compute_local_shape_and_offset(c.global_shape, c.mesh.shape(), coord, c.before));
    after.push_back(compute_local_shape_and_offset(c.global_shape, c.mesh.shape(), coord, c.after));
  }
  // The intersections, relative to this rank's shard before (sent) and after (received); an
  // empty one has shape zero.
  const LocalShard& mine_before = before[static_cast<size_t>(comm.rank())];
  const LocalShard& mine_after = after[static_cast<size_t>(comm.rank())];
  auto overlap = [&](const LocalShard& a, const LocalShard& b, const LocalShard& relative_to) {
    LocalShard o;
    if (!box_intersection(a.offset, a.shape, b.offset, b.shape, o.offset, o.shape)) {
      return LocalShard{Shape(ndim, 0), Shape(ndim, 0)};
    }
    for (size_t d = 0; d < ndim; ++d) o.offset[d] -= relative_to.offset[d];
    return o;
  };
  std::vector<LocalShard> sent, received;
  sent.reserve(static_cast<size_t>(n));
  received.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    sent.push_back(overlap(mine_before, after[k], mine_before));
    received.push_back(overlap(before[k], mine_after, mine_after));
  }
  if (comm.supports_regions(x.device())) {
    return exchange_regions(x, sent, received, c.target_shape, comm);
  }
  const Shape block = padded_block(before, after);
  Shape buffer_shape = {n};
  buffer_shape.insert(buffer_shape.end(), block.begin(), block.end());
  const Shape zero(ndim, 0);
  Tensor in;
  if (x.is_contiguous() && blocks_are_slabs(sent, block, x.shape())) {
    in = x.view(buffer_shape);
  } else {
    in = block_buffer(n, block, x, /*scratch=*/true);
    for (int64_t k = 0; k < n; ++k) {
      const LocalShard& b = sent[static_cast<size_t>(k)];
      Tensor slot = in.select(0, k);
      if (b.shape != block) slot.zero_();  // padding: never read, but kept deterministic
      if (shape_numel(b.shape) > 0) region(slot, zero, b.shape).copy_(region(x, b.offset, b.shape));
    }
  }
  const bool slabs = blocks_are_slabs(received, block, c.target_shape);
  Tensor out = block_buffer(n, block, x, /*scratch=*/!slabs);
  comm.all_to_all(out, in)->wait();
  if (slabs) return out.view(c.target_shape);
  Tensor result = empty(c.target_shape, TensorOptions(x.dtype(), x.device()));
  for (int64_t k = 0; k < n; ++k) {
    const LocalShard& b = received[static_cast<size_t>(k)];
    if (shape_numel(b.shape) == 0) continue;
    region(result, b.offset, b.shape).copy_(region(out.select(0, k), zero, b.shape));
  }
  return result;
}

Tensor run_step(const Tensor& x, bool x_is_intermediate, const RedistributeStep& step,
                const StepContext& ctx) {
  const DeviceMesh& mesh = ctx.mesh;
  const Shape& target_shape = ctx.target_shape;
  if (step.is_flattened()) {
    const CommunicatorPtr comm = mesh.flattened_communicator(
        std::vector<int64_t>(step.flat_dims.begin(), step.flat_dims.end()));
    DT_CHECK(comm != nullptr, "[redistribute] no flattened communicator for mesh dims %s",
             absl::StrJoin(step.flat_dims, "+"));
    if (step.kind == StepKind::kAllGather) return all_gather_flat(x, step, ctx, *comm);
    if (step.kind == StepKind::kAllToAll) return all_to_all_flat(x, step, ctx, *comm);
    DT_CHECK(step.kind == StepKind::kAllReduce,
             "[redistribute] internal error: a flattened %s step", step_kind_name(step.kind));
    return all_reduce_out(x, step.src.reduce_op(), *comm, x_is_intermediate);
  }
  const CommunicatorPtr& comm_ptr = mesh.communicator(step.mesh_dim);
  DT_CHECK(comm_ptr != nullptr, "[redistribute] no communicator for mesh dim %d on this rank",
           step.mesh_dim);
  Communicator& comm = *comm_ptr;
  switch (step.kind) {
    case StepKind::kAllGather:
      return all_gather_dim(x, step.src.dim(), target_shape[step.src.dim()], comm, target_shape);
    case StepKind::kAllReduce:
      return all_reduce_out(x, step.src.reduce_op(), comm, x_is_intermediate);
    case StepKind::kReduceScatter:
      return reduce_scatter_dim(x, step.dst.dim(), step.src.reduce_op(), comm);
    case StepKind::kAllToAll:
      return all_to_all_dims(x, step.src.dim(), step.dst.dim(), target_shape[step.src.dim()], comm,
                             target_shape);
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
    case StepKind::kShardToPartial: {
      // Each rank keeps its chunk at its place in zeros of the unsharded size: the sum over the
      // ranks is the whole. For avg the mean must be the whole, so the chunk is scaled by n.
      const int64_t d = step.src.dim();
      Tensor out = zeros(target_shape, TensorOptions(x.dtype(), x.device()));
      const ChunkBounds b = chunk_bounds(target_shape[d], comm.size(), comm.rank());
      if (b.size > 0) out.narrow(d, b.offset, b.size).copy_(x);
      if (step.dst.reduce_op() == ReduceOp::kAvg) {
        return detail::scaled_by_mesh_size(out, comm.size(), /*divide=*/false);
      }
      return out;
    }
  }
  DT_FAIL("[redistribute] unknown step kind %d", static_cast<int>(step.kind));
}

// Runs `plan` on this rank's shard `local` of `src` (this rank is in the mesh).
Tensor run_plan(const Tensor& local, const DTensorSpec& src, const RedistributePlan& plan,
                bool reuse_local);

}  // namespace

namespace {

// A failure on this rank only (an allocation, a shard of the wrong shape) is reported to the
// mesh's other ranks, whose next collective on the mesh then raises it.
Tensor run_plan_reporting(const Tensor& local, const DTensorSpec& src, const RedistributePlan& plan,
                          bool reuse_local) {
  try {
    return run_plan(local, src, plan, reuse_local);
  } catch (...) {
    report_failure_on_mesh(src.mesh(), "redistribute");
    throw;
  }
}

// A step being captured (dtensor/compile/) records the move with its plan: replay runs the plan
// again on the replay's tensor, without planning or a cache look-up.
void record_redistribute(detail::CaptureRecorder& recorder, const Tensor& local, const Tensor& out,
                         const DTensorSpec& src, const DTensorSpec& dst,
                         std::shared_ptr<const RedistributePlan> plan) {
  auto s = std::make_shared<const DTensorSpec>(src);
  auto d = std::make_shared<const DTensorSpec>(dst);
  auto payload = std::make_shared<const detail::CapturedMove>(detail::CapturedMove{s, d, plan});
  detail::ReplayFn fn;
  if (plan != nullptr) {
    fn = [s, plan = std::move(plan)](absl::Span<const Tensor> in, absl::Span<Tensor> o) {
      o[0] = run_plan_reporting(in[0], *s, *plan, /*reuse_local=*/false);
    };
  } else {
    fn = [s, d](absl::Span<const Tensor> in, absl::Span<Tensor> o) {
      o[0] = redistribute_cross_mesh_local(in[0], *s, *d);
    };
  }
  detail::CaptureEvent event;
  event.kind = "redistribute";
  event.name = "redistribute";
  event.detail = absl::StrCat(placements_str(src.placements()), " -> ",
                              placements_str(dst.placements()), " ", shape_str(src.shape()));
  // The specs' text names the mesh's shape only: the mesh's ranks tell equal-shaped meshes apart.
  event.move_src = absl::StrCat(src.str(), " on ", src.mesh().str());
  event.move_dst = absl::StrCat(dst.str(), " on ", dst.mesh().str());
  event.move_src_partial = src.has_partial();
  event.payload = std::move(payload);
  const Tensor ins[] = {local};
  const Tensor outs[] = {out};
  event.inputs = ins;
  event.outputs = outs;
  recorder.record(event, std::move(fn));
}

}  // namespace

Tensor redistribute_local(const Tensor& local, const DTensorSpec& src, const DTensorSpec& dst,
                          bool reuse_local) {
  const detail::CaptureScope capture;
  if (src.mesh() != dst.mesh()) {
    Tensor out = redistribute_cross_mesh_local(local, src, dst);
    if (capture.recording()) record_redistribute(capture.recorder(), local, out, src, dst, nullptr);
    return out;
  }
  std::shared_ptr<const RedistributePlan> plan = plan_redistribute(src, dst);
  if (log_enabled(LogTopic::kRedistribute)) detail::log_redistribute(src, dst, *plan);
  const DeviceMesh& mesh = src.mesh();
  if (!mesh.contains_me()) {
    return detail::empty_local(dst.ndim(), dst.dtype(), detail::mesh_device(mesh, local));
  }
  // While capturing, the capture holds every tensor of the step: the input is never reused.
  Tensor out = run_plan_reporting(local, src, *plan, reuse_local && !capture.recording());
  if (capture.recording()) {
    record_redistribute(capture.recorder(), local, out, src, dst, std::move(plan));
  }
  return out;
}

namespace detail {

DTensor redistribute_no_grad(const DTensor& t, const DTensorSpec& dst, bool reuse_local) {
  DT_CHECK(t.defined(), "[redistribute] the DTensor is undefined (expected a DTensor)");
  if (t.spec() == dst) return t;
  Tensor local = redistribute_local(t.to_local(), t.spec(), dst, reuse_local);
  return DTensor(std::move(local), std::make_shared<const DTensorSpec>(dst));
}

}  // namespace detail

namespace {

Tensor run_plan(const Tensor& local, const DTensorSpec& src, const RedistributePlan& plan,
                bool reuse_local) {
  const DeviceMesh& mesh = src.mesh();
  const Shape& coord = mesh.get_coordinate();
  const LocalShard expected = src.local_shard(coord);
  DT_CHECK(local.shape() == expected.shape && local.dtype() == src.dtype(),
           "[redistribute] local shard is %s %s but %s implies %s %s on coordinate %s",
           shape_str(local.shape()), dtype_name(local.dtype()), src.str(),
           shape_str(expected.shape), dtype_name(src.dtype()), shape_str(coord));
  // Decided before `x` below takes a second reference to the storage.
  reuse_local = reuse_local && local.storage().sole_owner();
  Placements state = src.placements();
  Placements before;
  Tensor x = local;
  for (const RedistributeStep& step : plan.steps) {
    before = state;
    if (step.is_flattened()) {
      for (size_t f = 0; f < step.flat_dims.size(); ++f)
        state[step.flat_dims[f]] = step.flat_dst[f];
    } else {
      state[step.mesh_dim] = step.dst;
    }
    const Shape target_shape =
        compute_local_shape_and_offset(src.shape(), mesh.shape(), coord, state).shape;
    // Steps may return their input unchanged (R -> P on coordinate 0), so whether x is the
    // caller's memory is decided by its storage, not by the step count.
    const bool x_is_intermediate = reuse_local || x.storage().data() != local.storage().data();
    const StepContext ctx{src.shape(), mesh, coord, before, state, target_shape};
    x = run_step(x, x_is_intermediate, step, ctx);
    DT_CHECK(x.shape() == target_shape,
             "[redistribute] internal error: step %s produced a local shard of shape %s, "
             "expected %s",
             step_kind_name(step.kind), shape_str(x.shape()), shape_str(target_shape));
  }
  return x;
}

}  // namespace
}  // namespace dtensor
