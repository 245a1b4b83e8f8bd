// Backward formulas of the softmax family (softmax_backward.cc), used by its registration
// (softmax_strategy.cc).
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

BackwardFormula softmax_grad;
BackwardFormula log_softmax_grad;
BackwardFormula softmin_grad;

}  // namespace dtensor::detail
