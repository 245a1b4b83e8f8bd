// Backward formulas of the masked_select family (masked_select_backward.cc), used by its
// registration.
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

DTensorList masked_select_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
