// Backward formulas of the matmul family (matmul_backward.cc).
#pragma once

#include "dtensor/ops/common/detail/backward_formula.h"

namespace dtensor::detail {

BackwardFormula mm_backward;
BackwardFormula bmm_backward;
BackwardFormula matmul_backward;
BackwardFormula addmm_backward;
BackwardFormula baddbmm_backward;
BackwardFormula linear_backward;
BackwardFormula dot_backward;
BackwardFormula outer_backward;

}  // namespace dtensor::detail
