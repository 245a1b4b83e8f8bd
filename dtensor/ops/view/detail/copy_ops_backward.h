// Backward formulas of the copying shape ops (copy_ops_backward.cc), used by their registration
// (copy_ops_strategy.cc). Each takes the op's args from the context; no input is saved.
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// clone / contiguous: the gradient itself.
DTensorList copy_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList flip_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList roll_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList repeat_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList repeat_interleave_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
// Through the diagonal_backward op.
DTensorList diagonal_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList tril_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList triu_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
