// Backward formulas of the loss family (loss_backward.cc), used by its registration.
#pragma once

#include <absl/types/span.h>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/common/detail/backward_formula.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"

namespace dtensor::detail {

BackwardFormula gather_target_grad;
// gather_target_backward: linear in grad, its gradient the target pick of the incoming one
// (gather_target; its double backward).
BackwardFormula gather_target_backward_grad;

// nll_loss's: the input's gradient through nll_loss_backward; the weights' (PyTorch has none:
// "not differentiable with respect to argument 'weight'") composed of registered ops.
BackwardFormula nll_loss_grad;

// The pointwise loss registered as `base` (pointwise_loss_backward.cc): through its gradient op
// <name>_backward, once per input that needs a gradient.
DTensorList pointwise_loss_formula(LossKind base, const autograd::BackwardContext& c,
                                   absl::Span<const DTensor> g);

}  // namespace dtensor::detail
