// The advanced_index family's internals (plan, checks, block kernels): shared by its Tensor
// functions, kernels and registration; not installed.
#pragma once

#include "dtensor/ops/advanced_index/advanced_index.h"

namespace dtensor {

namespace detail {

// The geometry of one index call. Self is viewed, after permuting its indexed dims into one
// block (`perm`: the identity when they are adjacent, else indexed dims first), as [P, M, Q]:
// P the product of the dims before the block, M of the indexed dims, Q of those after. The
// result is [P, N, Q] with N = numel(B), reshaped to `out`.
struct AdvancedIndexPlan {
  Shape dims;       // indexed dims of self, increasing
  Shape broadcast;  // B, the index tensors' broadcast shape
  bool adjacent = true;
  Shape out;              // the result's shape
  Shape perm;             // self's dims in block order
  int64_t out_first = 0;  // the result's dim where B starts (dims[0] when adjacent, else 0)
  int64_t p = 1, m = 1, q = 1;
  // The result's dim of each self dim (-1 for the indexed ones).
  Shape out_dim_of_self;
};
// Checks the shapes (`op` names the errors) and computes the plan; `dims` from indexed_dims.
AdvancedIndexPlan advanced_index_plan(const char* op, IntSpan self_shape, IntSpan dims,
                                      absl::Span<const Shape> index_shapes);
// The positions of the present entries of a list of `n` entries where `present(k)` says whether
// entry k is a tensor; checks n <= ndim and that one entry is present.
template <typename List>
Shape indexed_dims(const char* op, const List& indices, int64_t ndim) {
  DT_CHECK(static_cast<int64_t>(indices.size()) <= ndim,
           "[%s] too many indices for a tensor of %d dims (got %d)", op, ndim, indices.size());
  Shape dims;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (indices[k].has_value()) dims.push_back(static_cast<int64_t>(k));
  }
  DT_CHECK(!dims.empty(), "[%s] expected at least one index tensor among %d indices", op,
           indices.size());
  return dims;
}
// advanced_index_plan of a call on local tensors (self and its index tensors).
AdvancedIndexPlan local_index_plan(const char* op, const Tensor& self, IntSpan dims,
                                   absl::Span<const Tensor> indices);
// "" or "[op] index 7 out of range for dim 1 of size 5 (indices[1])": the first entry of
// `index` outside [-size, size).
std::string index_range_error(const char* op, const Tensor& index, int64_t dim, int64_t size);
// "" or the error for an index tensor's dtype (int64 or int32 expected).
std::string index_dtype_error(const char* op, DType dtype, int64_t dim);

// The kernels on a block of self: `self` holds positions [offsets[j], offsets[j] +
// self.size(dims[j])) of indexed dim dims[j] of a tensor whose size there is sizes[j] (whole
// dims: offset 0, the global size). Indices (in range, checked by the caller) are wrapped with
// the global size; entries outside this block give zeros (index) or are skipped (index_put).
Tensor index_block(const Tensor& self, IntSpan dims, absl::Span<const Tensor> indices,
                   IntSpan sizes, IntSpan offsets);
Tensor index_put_block(const Tensor& self, IntSpan dims, absl::Span<const Tensor> indices,
                       const Tensor& values, bool accumulate, IntSpan sizes, IntSpan offsets);

}  // namespace detail

}  // namespace dtensor
