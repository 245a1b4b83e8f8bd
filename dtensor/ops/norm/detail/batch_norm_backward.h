// Backward formulas of batch_norm_sums and batch_norm_affine and of their gradient ops
// (batch_norm_backward.cc), used by their registrations.
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

// Through the gradient op batch_norm_sums_backward (grad_output, input).
BackwardFormula batch_norm_sums_grad;

// Through the gradient op batch_norm_affine_backward (grad_output, input, factors).
BackwardFormula batch_norm_affine_grad;

// The gradient ops' own (the double backward of batch_norm), written with differentiable DTensor
// ops: linear in their grad_output, so the derivative with respect to it is the forward again.
BackwardFormula batch_norm_sums_backward_grad;
BackwardFormula batch_norm_affine_backward_grad;

}  // namespace dtensor::detail
