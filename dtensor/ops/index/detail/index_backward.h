// Backward formulas of the indexing family (index_backward.cc), used by its registration
// (index_strategy.cc).
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

// gather: through the gather_backward op (grad added at the indices into zeros of self's shape).
BackwardFormula gather_grad;
// gather_backward (grad, index; args dim, self's shape): linear in grad, its gradient the gather
// of the incoming one at the index (its double backward).
BackwardFormula gather_backward_grad;
BackwardFormula scatter_add_grad;
BackwardFormula scatter_grad;
BackwardFormula scatter_value_grad;
// PyTorch's scatter_reduce_backward (sum, mean, amax / amin, prod).
BackwardFormula scatter_reduce_grad;
BackwardFormula index_add_grad;

}  // namespace dtensor::detail
