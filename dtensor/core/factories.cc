// DTensor factories: the global spec is validated once, then each rank fills its own shard
// from the shard's offset (DTensorSpec::local_shard), so no rank communicates.
#include "dtensor/core/factories.h"

#include <functional>
#include <string>

#include "dtensor/core/detail/util.h"
#include "dtensor/core/dtensor_spec.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// Fills a local shard of the given shape at the given global offset.
using FillFn = std::function<Tensor(const LocalShard& shard, TensorOptions opts)>;

DTensor make(std::string_view op, IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements,
             DType dtype, const FillFn& fill) {
  DT_CHECK(mesh.defined(), "[%s] the device mesh is an empty handle (expected a mesh)", op);
  check_user_placements(placements, dtype, op);
  for (const Placement& p : placements) {
    DT_CHECK(!p.is_partial(),
             "[%s] placements %s: a new DTensor cannot be Partial (it has no pending reduction; "
             "expected Shard or Replicate)",
             op, placements_str(placements));
  }
  auto spec =
      std::make_shared<const DTensorSpec>(mesh, Placements(placements.begin(), placements.end()),
                                          TensorMeta(Shape(shape.begin(), shape.end()), dtype), op);
  const Device device = local_device(mesh);
  if (!mesh.contains_me()) {
    return DTensor(detail::empty_local(spec->ndim(), dtype, device), std::move(spec));
  }
  const LocalShard shard = spec->local_shard();
  const TensorOptions opts(dtype, device);
  if (detail::capture_recorder() == nullptr) return DTensor(fill(shard, opts), std::move(spec));
  // While a step is captured by dtensor::compile the shard is made by a recorded primitive, so
  // replay makes it again (a backward formula's full_like / ones_like, a constant made in the
  // step); a tensor made in the step outside any primitive would be refused.
  Tensor local[1];
  detail::run_recorded("op", std::string(op), {}, local, 0,
                       [fill, shard, opts](absl::Span<const Tensor>, absl::Span<Tensor> out) {
                         out[0] = fill(shard, opts);
                       });
  return DTensor(std::move(local[0]), std::move(spec));
}

}  // namespace

Placements without_partial(const DTensorSpec& like) {
  Placements out = like.placements();
  for (Placement& p : out) {
    if (p.is_partial()) p = Replicate();
  }
  return out;
}

DTensor empty(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements, DType dtype) {
  return make("empty", shape, mesh, placements, dtype,
              [](const LocalShard& s, TensorOptions o) { return empty(s.shape, o); });
}

DTensor zeros(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements, DType dtype) {
  return make("zeros", shape, mesh, placements, dtype,
              [](const LocalShard& s, TensorOptions o) { return zeros(s.shape, o); });
}

DTensor ones(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements, DType dtype) {
  return make("ones", shape, mesh, placements, dtype,
              [](const LocalShard& s, TensorOptions o) { return ones(s.shape, o); });
}

DTensor full(IntSpan shape, const Scalar& value, const DeviceMesh& mesh, PlacementSpan placements,
             DType dtype) {
  return make("full", shape, mesh, placements, dtype,
              [value](const LocalShard& s, TensorOptions o) { return full(s.shape, value, o); });
}

DTensor arange(double start, double end, double step, const DeviceMesh& mesh,
               PlacementSpan placements, DType dtype) {
  const int64_t n = arange_numel(start, end, step);
  return make("arange", {n}, mesh, placements, dtype,
              [start, step](const LocalShard& s, TensorOptions o) {
                return arange_slice(start, step, s.offset[0], s.shape[0], o);
              });
}

DTensor eye(int64_t n, int64_t m, const DeviceMesh& mesh, PlacementSpan placements, DType dtype) {
  DT_CHECK(n >= 0 && m >= -1, "[eye] n = %d and m = %d must be non-negative (m = -1: m = n)", n, m);
  return make("eye", {n, m < 0 ? n : m}, mesh, placements, dtype,
              [](const LocalShard& s, TensorOptions o) {
                return eye_block(s.shape[0], s.shape[1], s.offset[0], s.offset[1], o);
              });
}

DTensor empty_like(const DTensor& like) {
  DT_CHECK(like.defined(), "[empty_like] the DTensor is undefined (expected a DTensor)");
  return empty(like.shape(), like.device_mesh(), without_partial(like.spec()), like.dtype());
}

DTensor ones_like(const DTensor& like) {
  DT_CHECK(like.defined(), "[ones_like] the DTensor is undefined (expected a DTensor)");
  return ones(like.shape(), like.device_mesh(), without_partial(like.spec()), like.dtype());
}

DTensor full_like(const DTensor& like, const Scalar& value) {
  DT_CHECK(like.defined(), "[full_like] the DTensor is undefined (expected a DTensor)");
  return full(like.shape(), value, like.device_mesh(), without_partial(like.spec()), like.dtype());
}

}  // namespace dtensor
