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

}  // namespace dtensor::detail
