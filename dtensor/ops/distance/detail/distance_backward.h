// The distance family's backward formulas (distance_backward.cc) and cdist's gradient op,
// used by its registration (distance_strategy.cc).
#pragma once

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/common/detail/backward_formula.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// PyTorch's _cdist_backward: the gradient of cdist(x1, x2, p) with respect to x1, from the
// output gradient `grad` and the forward result `dist` ([*, P, R]); x2's gradient is the same
// with the roles swapped (grad and dist transposed). Local (distance.cc) and DTensor
// (distance_dtensor.cc, the registered op cdist_backward) forms.
Tensor cdist_backward(const Tensor& grad, const Tensor& x1, const Tensor& x2, const Tensor& dist,
                      double p);
DTensor cdist_backward(const DTensor& grad, const DTensor& x1, const DTensor& x2,
                       const DTensor& dist, double p);

// cdist: (cdist_backward(g, x1, x2, out), cdist_backward(g^T, x2, x1, out^T)).
BackwardFormula cdist_grad;

}  // namespace dtensor::detail
