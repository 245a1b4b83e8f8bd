// Backward formulas of scaled_dot_product_attention (attention_backward.cc), used by its
// registration (attention_strategy.cc).
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// scaled_dot_product_attention's and scaled_dot_product_attention.mask's (the mask receives no
// gradient).
DTensorList attention_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList attention_mask_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
