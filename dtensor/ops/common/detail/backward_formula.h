// The one signature of the op families' backward formulas (OpInfo::backward, run by the autograd
// engine): the inputs' gradients from the context (the op's saved inputs and outputs, its args)
// and the outputs' gradients `g`.
#pragma once

#include <absl/types/span.h>

#include "dtensor/autograd/function.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// A family's detail/*_backward.h declares each formula with it: `BackwardFormula mm_backward;`
// declares `DTensorList mm_backward(const autograd::BackwardContext& c,
// absl::Span<const DTensor> g)`, which its *_backward.cc defines as any function.
using BackwardFormula = DTensorList(const autograd::BackwardContext& c,
                                    absl::Span<const DTensor> g);

}  // namespace dtensor::detail
