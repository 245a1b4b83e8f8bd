// Backward formulas of the copying shape ops (copy_ops_backward.cc), used by their registration
// (copy_ops_strategy.cc). Each takes the op's args from the context; no input is saved.
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

// clone / contiguous: the gradient itself.
BackwardFormula copy_grad;
BackwardFormula flip_grad;
BackwardFormula roll_grad;
BackwardFormula repeat_grad;
BackwardFormula repeat_interleave_grad;
// Through the diagonal_backward op.
BackwardFormula diagonal_grad;
// The gradient ops repeat_interleave_backward and diagonal_backward: linear in grad, their
// gradient the forward op of the incoming one (repeat_interleave, diagonal; their double
// backward).
BackwardFormula repeat_interleave_backward_grad;
BackwardFormula diagonal_backward_grad;
BackwardFormula tril_grad;
BackwardFormula triu_grad;

}  // namespace dtensor::detail
