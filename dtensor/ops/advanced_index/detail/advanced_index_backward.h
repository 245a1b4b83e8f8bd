// Backward formulas of advanced indexing (advanced_index_backward.cc), used by its registration
// (advanced_index_strategy.cc).
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

DTensorList index_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList index_put_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
