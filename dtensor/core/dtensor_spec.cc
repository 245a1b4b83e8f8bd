#include "dtensor/core/dtensor_spec.h"

#include <absl/hash/hash.h>
#include <absl/strings/str_format.h>

#include "dtensor/core/detail/util.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

TensorMeta::TensorMeta(Shape shape_in, DType dtype_in)
    : shape(std::move(shape_in)), stride(contiguous_strides(shape)), dtype(dtype_in) {}

TensorMeta::TensorMeta(Shape shape_in, Shape stride_in, DType dtype_in)
    : shape(std::move(shape_in)), stride(std::move(stride_in)), dtype(dtype_in) {
  DT_CHECK(stride.size() == shape.size(),
           "[TensorMeta] stride %s has %d dims but shape %s has %d (expected one stride per dim)",
           shape_str(stride), stride.size(), shape_str(shape), shape.size());
}

namespace detail {

int64_t normalize_shard_dim(int64_t dim, int64_t ndim, int64_t mesh_dim, PlacementSpan placements,
                            std::string_view op) {
  DT_CHECK(ndim > 0 && dim >= -ndim && dim < ndim,
           "[%s] Shard dim %d out of range for a %d-d tensor (expected %d..%d; mesh dim %d, "
           "placements %s)",
           op, dim, ndim, -ndim, ndim - 1, mesh_dim, placements_str(placements));
  return dim < 0 ? dim + ndim : dim;
}

}  // namespace detail

LocalShard compute_local_shape_and_offset(IntSpan global_shape, IntSpan mesh_shape,
                                          IntSpan coordinate, PlacementSpan placements) {
  constexpr std::string_view kOp = "compute_local_shape_and_offset";
  const int64_t ndim = static_cast<int64_t>(global_shape.size());
  DT_CHECK(placements.size() == mesh_shape.size(),
           "[%s] got %d placements %s for a %d-d mesh (expected one per mesh dim)", kOp,
           placements.size(), placements_str(placements), mesh_shape.size());
  LocalShard out;
  out.offset.assign(ndim, 0);
  if (coordinate.empty()) {
    out.shape.assign(ndim, 0);
    return out;
  }
  DT_CHECK(coordinate.size() == mesh_shape.size(),
           "[%s] coordinate %s has %d entries for a %d-d mesh (expected one per mesh dim)", kOp,
           shape_str(coordinate), coordinate.size(), mesh_shape.size());
  out.shape.assign(global_shape.begin(), global_shape.end());
  for (size_t i = 0; i < placements.size(); ++i) {
    if (!placements[i].is_shard()) continue;
    const int64_t d = detail::normalize_shard_dim(placements[i].dim(), ndim,
                                                  static_cast<int64_t>(i), placements, kOp);
    const ChunkBounds b = chunk_bounds(out.shape[d], mesh_shape[i], coordinate[i]);
    out.offset[d] += b.offset;
    out.shape[d] = b.size;
  }
  return out;
}

DTensorSpec::DTensorSpec(DeviceMesh mesh, PlacementSpan placements, TensorMeta meta,
                         std::string_view op)
    : mesh_(std::move(mesh)),
      placements_(placements.begin(), placements.end()),
      meta_(std::move(meta)) {
  DT_CHECK(mesh_.defined(), "[%s] the device mesh is an empty handle (expected a mesh)", op);
  DT_CHECK(static_cast<int64_t>(placements_.size()) == mesh_.ndim(),
           "[%s] got %d placements %s for a %d-d mesh (expected one per mesh dim)", op,
           placements_.size(), placements_str(placements_), mesh_.ndim());
  DT_CHECK(meta_.stride.size() == meta_.shape.size(),
           "[%s] stride %s has %d dims but shape %s has %d (expected one stride per dim)", op,
           shape_str(meta_.stride), meta_.stride.size(), shape_str(meta_.shape),
           meta_.shape.size());
  for (int64_t d : meta_.shape) {
    DT_CHECK(d >= 0, "[%s] global shape %s has a negative size (expected sizes >= 0)", op,
             shape_str(meta_.shape));
  }
  // A global shape whose element count or extent overflows int64 is refused here, naming the
  // global shape, rather than later through some local shard's allocation.
  shape_numel(meta_.shape, op);
  check_strides(meta_.shape, meta_.stride, op);
  const Placements original = placements_;
  for (size_t i = 0; i < placements_.size(); ++i) {
    if (!placements_[i].is_shard()) continue;
    placements_[i] = Shard(detail::normalize_shard_dim(placements_[i].dim(), ndim(),
                                                       static_cast<int64_t>(i), original, op));
  }
  hash_ = absl::HashOf(mesh_.hash(), placements_, meta_);
}

int64_t DTensorSpec::numel() const {
  return shape_numel(meta_.shape);
}

bool DTensorSpec::is_replicated() const {
  for (const Placement& p : placements_) {
    if (!p.is_replicate()) return false;
  }
  return true;
}

bool DTensorSpec::has_partial() const {
  for (const Placement& p : placements_) {
    if (p.is_partial()) return true;
  }
  return false;
}

absl::InlinedVector<int64_t, 4> DTensorSpec::mesh_dims_sharding(int64_t dim) const {
  absl::InlinedVector<int64_t, 4> out;
  if (dim < 0) dim += ndim();
  for (size_t i = 0; i < placements_.size(); ++i) {
    if (placements_[i].is_shard(dim)) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

LocalShard DTensorSpec::local_shard() const {
  return local_shard(mesh_.get_coordinate());
}

LocalShard DTensorSpec::local_shard(IntSpan coordinate) const {
  return compute_local_shape_and_offset(meta_.shape, mesh_.shape(), coordinate, placements_);
}

DTensorSpec DTensorSpec::with_placements(PlacementSpan placements, std::string_view op) const {
  return DTensorSpec(mesh_, placements, meta_, op);
}

DTensorSpec DTensorSpec::with_meta(TensorMeta meta, std::string_view op) const {
  return DTensorSpec(mesh_, placements_, std::move(meta), op);
}

std::string DTensorSpec::str() const {
  if (!mesh_.defined()) return "DTensorSpec()";
  return absl::StrFormat("DTensorSpec(%s, shape=%s, %s, mesh=%s)", placements_str(placements_),
                         shape_str(meta_.shape), dtype_name(meta_.dtype), shape_str(mesh_.shape()));
}

void check_user_placements(PlacementSpan placements, DType dtype, std::string_view op) {
  for (const Placement& p : placements) {
    DT_CHECK(!(p.is_partial() && p.reduce_op() == ReduceOp::kAvg && dtype == DType::kBool),
             "[%s] Partial(avg) of a bool tensor (the mean of booleans is not a bool; use "
             "Partial(sum) of an integer dtype, or Partial(max)/Partial(min))",
             op);
  }
}

}  // namespace dtensor
