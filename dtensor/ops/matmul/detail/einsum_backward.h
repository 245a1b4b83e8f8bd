// einsum's backward formula (einsum_backward.cc), used by its registration.
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

BackwardFormula einsum_backward;

}  // namespace dtensor::detail
