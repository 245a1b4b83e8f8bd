// Backward formulas of the view and shape ops (view_backward.cc), looked up by op name at
// registration (view_strategy.cc, which also registers select_backward and slice_backward, the
// two ops they dispatch).
#pragma once

#include <string_view>

#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/core/propagation/registry.h"

namespace dtensor::detail {

// The formula of the view op `name` (empty when it has none).
BackwardFn view_grad(std::string_view name);

}  // namespace dtensor::detail
