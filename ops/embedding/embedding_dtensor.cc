#include "dtensor/propagation/dispatch.h"
#include "ops/embedding/embedding.h"
#include "ops/view/dtensor_op_util.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

// Out-of-range indices would be silently masked to zero rows by embedding_masked; check them
// against the global table size first (locally, no communication).
void check_indices(const Tensor& indices, int64_t rows) {
  const Tensor idx = indices.to(Device(kCPU), kInt64).contiguous();
  const int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i) {
    DT_CHECK(p[i] >= 0 && p[i] < rows, "[embedding] index %d out of range for a table of %d rows",
             p[i], rows);
  }
}

}  // namespace

DTensor embedding(const DTensor& indices, const DTensor& weight) {
  static const OpInfo& op = detail::family_op("embedding");
  const DTensor* in[] = {&weight, &indices};
  const std::shared_ptr<const OutputSharding> sh = detail::sharding_for(op, in, {});
  const DTensorSpec& wspec =
      sh->needs_redistribute() && sh->required_inputs[0] ? *sh->required_inputs[0] : weight.spec();
  bool row_sharded = false;
  for (const Placement& p : wspec.placements()) row_sharded |= p.is_shard(0);
  const int64_t rows = weight.size(0);
  const int64_t row_offset =
      row_sharded && wspec.mesh().contains_me() ? wspec.local_shard().offset[0] : 0;
  return dispatch(op, in, {}, [&](absl::Span<const Tensor> l) {
    if (!row_sharded) return embedding(l[1], l[0]);
    check_indices(l[1], rows);
    return embedding_masked(l[1], l[0], row_offset);
  });
}

}  // namespace dtensor
