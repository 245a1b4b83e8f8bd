// Backward formulas of the pool family (pool_backward.cc), used by its registration
// (pool_strategy.cc).
#pragma once

#include <absl/types/span.h>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

// The linear window ops (pad, avg / adaptive avg pools, upsample_*): the gradient through the
// transposed windows, op <name>_backward(grad; the forward's args, the input's shape); constant
// padding's is the gradient cropped (pad with the pads negated).
BackwardFormula window_grad;
// The max pools (values, indices) over `nd` spatial dims: the values' gradient added at the
// indices, op max_pool_backward(grad, indices; input shape, nd).
DTensorList max_window_grad(int64_t nd, const autograd::BackwardContext& c,
                            absl::Span<const DTensor> g);

// <name>_backward's (linear in grad): the forward window op <name> of the incoming gradient
// (constant padding's with the value 0).
BackwardFormula window_backward_grad;
// max_pool_backward's (linear in grad): the incoming gradient gathered at the indices over the
// flattened spatial planes; none for the indices.
BackwardFormula max_pool_backward_grad;

}  // namespace dtensor::detail
