// Backward formulas of the masked_select family (masked_select_backward.cc), used by its
// registration.
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

BackwardFormula masked_select_grad;

}  // namespace dtensor::detail
