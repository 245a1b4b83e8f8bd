#include "dtensor/ops/common/detail/reduce_iter.h"

namespace dtensor::detail {

namespace {

// Appends (size, stride) to a row-major dim list, merging with the previous dim when the pair
// is contiguous (outer stride == inner stride * inner size) and skipping size-1 dims.
void push_dim(Shape& sizes, Shape& strides, int64_t size, int64_t stride) {
  if (size == 1) return;
  if (!sizes.empty() && strides.back() == stride * size) {
    sizes.back() *= size;
    strides.back() = stride;
    return;
  }
  sizes.push_back(size);
  strides.push_back(stride);
}

}  // namespace

ReducePlan make_reduce_plan(const Tensor& in, IntSpan dims, bool keepdim, std::string_view op) {
  ReducePlan plan;
  const int64_t nd = in.dim();
  DT_CHECK(nd <= 64, "[%s] at most 64 dims supported, got %d", op, nd);
  if (dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) plan.reduced_mask[d] = true;
  } else {
    for (int64_t dim : dims) {
      const int64_t d = normalize_dim(dim, nd, op);
      if (nd == 0) continue;
      DT_CHECK(!plan.reduced_mask[d], "[%s] dim %d appears more than once in dims %s", op, d,
               shape_str(dims));
      plan.reduced_mask[d] = true;
    }
  }
  Shape kept_sizes;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t size = in.size(d);
    if (plan.reduced_mask[d]) {
      if (keepdim) plan.out_shape.push_back(1);
      plan.red_numel *= size;
      if (size == 0 && plan.empty_dim < 0) plan.empty_dim = d;
      push_dim(plan.red_sizes, plan.red_strides, size, in.stride(d));
    } else {
      plan.out_shape.push_back(size);
      push_dim(plan.kept_sizes, plan.kept_strides, size, in.stride(d));
    }
  }
  plan.out_numel = shape_numel(plan.out_shape);
  return plan;
}

}  // namespace dtensor::detail
