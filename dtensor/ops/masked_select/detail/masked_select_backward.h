// Backward formulas of the masked_select family (masked_select_backward.cc), used by its
// registration.
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

BackwardFormula masked_select_grad;
// masked_select_backward: linear in grad, its gradient the masked_select of the incoming one
// (its double backward).
BackwardFormula masked_select_backward_grad;

}  // namespace dtensor::detail
