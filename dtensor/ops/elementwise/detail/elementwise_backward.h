// Backward formulas of the elementwise family (elementwise_backward.cc), looked up by op name
// at registration (elementwise_strategy.cc).
#pragma once

#include <cstdint>
#include <string_view>

#include "dtensor/core/propagation/op_schema.h"

namespace dtensor::detail {

struct PointwiseGrad {
  BackwardFn backward;         // empty: the op has no gradient formula here
  uint32_t saved_inputs = 0;   // OpInfo::saved_inputs
  uint32_t saved_outputs = 0;  // OpInfo::saved_outputs
};

// The formula of the elementwise op `name` ("add", "mul.Scalar", "exp", "add_", ...).
PointwiseGrad pointwise_grad(std::string_view name);

}  // namespace dtensor::detail
