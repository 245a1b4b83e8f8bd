// Backward formula of batch_norm_sums (batch_norm_backward.cc), used by its registration.
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// Through the gradient op batch_norm_sums_backward (grad_output, input).
DTensorList batch_norm_sums_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
