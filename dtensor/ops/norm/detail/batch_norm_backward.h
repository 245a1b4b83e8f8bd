// Backward formulas of batch_norm_sums and batch_norm_affine (batch_norm_backward.cc), used by
// their registrations.
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// Through the gradient op batch_norm_sums_backward (grad_output, input).
DTensorList batch_norm_sums_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

// Through the gradient op batch_norm_affine_backward (grad_output, input, factors).
DTensorList batch_norm_affine_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
