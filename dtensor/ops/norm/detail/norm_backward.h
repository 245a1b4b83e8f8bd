// Backward formulas of the norm family (norm_backward.cc), used by its registration.
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

// layer_norm's and rms_norm's: one fused op each (layer_norm_backward / rms_norm_backward).
BackwardFormula layer_norm_grad;
BackwardFormula rms_norm_grad;

}  // namespace dtensor::detail
