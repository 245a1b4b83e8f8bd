// Backward formulas of the scan family (scan_backward.cc), used by its registration
// (scan_strategy.cc).
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// cumsum: the gradient of x[i] is the sum of g[j] over j >= i, a reversed cumsum.
DTensorList cumsum_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
// cumprod: through the cumprod_backward op.
DTensorList cumprod_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
// sort / cummax / cummin (dim arg 0), topk (dim arg 1, dim kept) and kthvalue (dim arg 1,
// keepdim arg 2): the values' gradient goes back to the positions the indices name.
DTensorList values_indices_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList topk_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList kthvalue_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

// median.dim / mode (dim arg 0, keepdim arg 1): the values' gradient goes back to the indices.
DTensorList pick_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
// median of the whole tensor: shared evenly among the elements equal to the median.
DTensorList median_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
// logcumsumexp: PyTorch's logcumsumexp_backward (reversed logcumsumexps of log|grad| - out for
// the positive and the negative gradients, so nothing overflows).
DTensorList logcumsumexp_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
