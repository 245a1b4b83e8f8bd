// Backward formulas of the convolutions (conv_backward.cc), used by their registration.
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

// convolution's: one convolution_backward op for the input and weight gradients asked for.
BackwardFormula convolution_grad;
// convolution_backward's (the double backward): convolution and convolution_backward ops.
BackwardFormula convolution_backward_grad;

}  // namespace dtensor::detail
