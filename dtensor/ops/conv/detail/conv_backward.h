// Backward formula of the convolutions (conv_backward.cc), used by their registration.
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// convolution's: one convolution_backward op for the input and weight gradients asked for.
DTensorList convolution_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
