// Backward formulas of advanced indexing (advanced_index_backward.cc), used by its registration
// (advanced_index_strategy.cc).
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

BackwardFormula index_grad;
BackwardFormula index_put_grad;

}  // namespace dtensor::detail
