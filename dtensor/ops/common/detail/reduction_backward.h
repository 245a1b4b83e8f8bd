// Backward formulas of the reduction family (reduction_backward.cc), looked up by op name at
// registration (reduction_strategy.cc).
#pragma once

#include <cstdint>
#include <string_view>

#include "dtensor/core/propagation/op_schema.h"

namespace dtensor::detail {

struct ReductionGrad {
  BackwardFn backward;
  uint32_t saved_inputs = 0;
  uint32_t saved_outputs = 0;
};

// The formula of the reduction `name` (empty for argmax/argmin, which are not differentiable).
ReductionGrad reduction_grad(std::string_view name);

// The gradient of max/min along a dim (values and indices): `grad` (the values' gradient,
// keepdim or not as the forward was) put at `indices` along `dim` of a zero tensor of
// `input_shape`. A registered op (value_selecting_backward), so it is sharded like any op.
DTensor value_selecting_backward(const DTensor& grad, const DTensor& indices, int64_t dim,
                                 bool keepdim, IntSpan input_shape);

}  // namespace dtensor::detail
