// Backward formulas of the softmax family (softmax_backward.cc), used by its registration
// (softmax_strategy.cc).
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

DTensorList softmax_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList log_softmax_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList softmin_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
