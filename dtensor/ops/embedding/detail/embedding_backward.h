// The backward formula of embedding (embedding_backward.cc), used by its registration.
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

BackwardFormula embedding_grad;
// embedding_backward: linear in grad, its gradient the lookup of the incoming one by the indices
// (embedding), zero where an index is padding_idx (its double backward, as PyTorch's
// embedding_dense_double_backward).
BackwardFormula embedding_backward_grad;

// How many times each row of a `rows`-row table occurs in the (global) batch `indices`: a
// [rows, 1] DTensor of `dtype`, computed as embedding_backward of ones (so on any placements;
// out-of-range indices are not counted).
DTensor embedding_counts(const DTensor& indices, int64_t rows, DType dtype);

}  // namespace dtensor::detail
