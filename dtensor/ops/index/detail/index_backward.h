// Backward formulas of the indexing family (index_backward.cc), used by its registration
// (index_strategy.cc).
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// gather: through the gather_backward op (grad added at the indices into zeros of self's shape).
DTensorList gather_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList scatter_add_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList scatter_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList scatter_value_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
// PyTorch's scatter_reduce_backward (sum, mean, amax / amin, prod).
DTensorList scatter_reduce_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList index_add_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
