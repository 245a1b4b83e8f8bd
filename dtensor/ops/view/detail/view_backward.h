// Backward formulas of the view and shape ops (view_backward.cc), looked up by op name at
// registration (view_strategy.cc), and the two ops they need.
#pragma once

#include <string_view>

#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/core/propagation/registry.h"

namespace dtensor::detail {

// The formula of the view op `name` (empty when it has none).
BackwardFn view_grad(std::string_view name);

// Registers select_backward(grad; input_shape, dim, index) and slice_backward(grad;
// input_shape, dim, start, end, step): zeros of input_shape with `grad` written at the selected
// index / slice. Every other dim may stay sharded; linear in grad.
void register_view_backward_ops(Registry& reg);

}  // namespace dtensor::detail
