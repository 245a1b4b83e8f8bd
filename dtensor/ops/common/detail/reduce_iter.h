// Iteration for reductions over a set of dims: the output holds one element per combination
// of the kept dims (contiguous, row-major); each is reduced over the elements of the reduced
// dims, visited in row-major order of those dims (so a running counter is the flattened index
// argmax needs).
#pragma once

#include <string_view>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

struct ReducePlan {
  Shape out_shape;     // result shape: reduced dims removed, or kept as 1 with keepdim
  Shape kept_sizes;    // kept dims (size-1 dims dropped, mergeable dims merged), outer first
  Shape kept_strides;  // input strides of the kept dims, in elements
  Shape red_sizes;     // reduced dims, merged where row-major order allows, outer first
  Shape red_strides;   // input strides of the reduced dims, in elements
  int64_t out_numel = 0;
  int64_t red_numel = 1;       // elements reduced into each output element
  int64_t empty_dim = -1;      // a reduced dim of size 0 (for error messages), else -1
  bool reduced_mask[64] = {};  // reduced_mask[d]: input dim d is reduced
};

// Normalises `dims` (negative dims count from the end; empty = all dims; a 0-d tensor accepts
// 0 and -1) and builds the plan. Throws "[op] dim d appears more than once in dims" and the
// usual out-of-range error.
ReducePlan make_reduce_plan(const Tensor& in, IntSpan dims, bool keepdim, std::string_view op);

// One row-major step of the index `counter` over the first nd dims of `sizes` (the last of
// them fastest), moving the element offset `off` by the matching `strides`.
inline void step_offset(Shape& counter, const Shape& sizes, const Shape& strides, int nd,
                        int64_t& off) {
  for (int d = nd - 1; d >= 0; --d) {
    if (++counter[d] < sizes[d]) {
      off += strides[d];
      return;
    }
    counter[d] = 0;
    off -= strides[d] * (sizes[d] - 1);
  }
}

// Calls f(out_index, in_offset) for every output element, out_index = 0, 1, ...; in_offset is
// the element offset (from in.data_ptr()) of its first reduced element.
template <typename F>
void for_each_reduce_output(const ReducePlan& plan, F&& f) {
  if (plan.out_numel == 0) return;
  const int nd = static_cast<int>(plan.kept_sizes.size());
  if (nd == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  Shape counter(nd, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < plan.out_numel; ++o) {
    f(o, off);
    step_offset(counter, plan.kept_sizes, plan.kept_strides, nd, off);
  }
}

// Calls row(offset, n, stride) for each innermost run of reduced elements starting at element
// offset `base`, in row-major order; the run holds n elements `stride` apart.
template <typename F>
void for_each_reduce_row(const ReducePlan& plan, int64_t base, F&& row) {
  if (plan.red_numel == 0) return;
  const int nd = static_cast<int>(plan.red_sizes.size());
  if (nd == 0) {
    row(base, int64_t{1}, int64_t{1});
    return;
  }
  const int64_t n = plan.red_sizes[nd - 1];
  const int64_t stride = plan.red_strides[nd - 1];
  if (nd == 1) {
    row(base, n, stride);
    return;
  }
  Shape counter(nd - 1, 0);
  const int64_t rows = plan.red_numel / n;
  int64_t off = base;
  for (int64_t r = 0; r < rows; ++r) {
    row(off, n, stride);
    step_offset(counter, plan.red_sizes, plan.red_strides, nd - 1, off);
  }
}

}  // namespace dtensor::detail
