// Backward formulas of the scan family (scan_backward.cc), used by its registration
// (scan_strategy.cc).
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

// cumsum: the gradient of x[i] is the sum of g[j] over j >= i, a reversed cumsum.
BackwardFormula cumsum_grad;
// cumprod: through the cumprod_backward op.
BackwardFormula cumprod_grad;
// sort / cummax / cummin (dim arg 0), topk (dim arg 1, dim kept) and kthvalue (dim arg 1,
// keepdim arg 2): the values' gradient goes back to the positions the indices name.
BackwardFormula values_indices_grad;
BackwardFormula topk_grad;
BackwardFormula kthvalue_grad;

// median.dim / mode (dim arg 0, keepdim arg 1): the values' gradient goes back to the indices.
BackwardFormula pick_grad;
// median of the whole tensor: shared evenly among the elements equal to the median.
BackwardFormula median_grad;
// logcumsumexp: PyTorch's logcumsumexp_backward (reversed logcumsumexps of log|grad| - out for
// the positive and the negative gradients, so nothing overflows).
BackwardFormula logcumsumexp_grad;

}  // namespace dtensor::detail
