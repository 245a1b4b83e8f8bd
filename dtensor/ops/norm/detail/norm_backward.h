// Backward formulas of the norm family (norm_backward.cc), used by its registration.
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// layer_norm's and rms_norm's: one fused op each (layer_norm_backward / rms_norm_backward).
DTensorList layer_norm_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList rms_norm_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
