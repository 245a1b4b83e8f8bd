// copy_ops' argument checks and shapes (copy_ops.cc), shared by its Tensor functions and
// registration: internal to the view family, not installed.
#pragma once

#include "dtensor/ops/view/copy_ops.h"

namespace dtensor {

namespace detail {
// Validation shared by the Tensor and DTensor forms (errors name `op`): the normalised dims,
// distinct; the permutation movedim makes; the unflattened shape (-1 inferred).
Shape distinct_dims(IntSpan dims, int64_t ndim, std::string_view op);
Shape movedim_permutation(IntSpan source, IntSpan destination, int64_t ndim);
Shape unflatten_shape(IntSpan shape, int64_t dim, IntSpan sizes);
// The shape of repeat(x of `shape`, repeats), checking repeats.
Shape repeat_shape(IntSpan shape, IntSpan repeats);
// tile's reps padded with leading 1s to `ndim` entries (repeat's argument).
Shape tile_repeats(IntSpan reps, int64_t ndim);
// tril / triu need a matrix (or a batch of them): >= 2 dims.
void check_triangle_input(std::string_view op, IntSpan shape);
// torch.roll's argument check: one shift per dim (or one shift and no dims).
void check_roll_args(IntSpan shifts, IntSpan dims);
// repeat_interleave's checks: the normalised dim ("[repeat_interleave] repeats -1 must be >=
// 0").
int64_t check_repeat_interleave(IntSpan shape, int64_t repeats, int64_t dim);
// diagonal's checks and its normalised, distinct dims and length.
struct DiagonalDims {
  int64_t dim1, dim2, length;
};
DiagonalDims diagonal_dims(IntSpan shape, int64_t offset, int64_t dim1, int64_t dim2);
// The output shape of diagonal.
Shape diagonal_shape(IntSpan shape, int64_t offset, int64_t dim1, int64_t dim2);
}  // namespace detail

}  // namespace dtensor
