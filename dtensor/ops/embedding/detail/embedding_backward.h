// The backward formula of embedding (embedding_backward.cc), used by its registration.
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

BackwardFormula embedding_grad;

}  // namespace dtensor::detail
