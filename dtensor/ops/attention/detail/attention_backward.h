// Backward formulas of scaled_dot_product_attention (attention_backward.cc), used by its
// registration (attention_strategy.cc).
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

// scaled_dot_product_attention's and scaled_dot_product_attention.mask's (the mask receives no
// gradient).
BackwardFormula attention_grad;
BackwardFormula attention_mask_grad;

}  // namespace dtensor::detail
