// Relative tolerances per dtype, one table for every test that compares a computed result with
// a float64 reference. Only the float32 figure depends on the kind of result, so callers name
// it: a result rounded once from exact math plus a few ulp of libm error (elementwise ops,
// ~8 ulp: 1e-6), a result accumulated in float (reductions, GEMM, norms: 3e-6), or one from
// another device's differently ordered accumulation (CUDA vs CPU: 1e-5). float64 1e-12,
// float16 2e-3 (4 ulp of its 10-bit mantissa), bfloat16 1.6e-2 (4 ulp of 7 bits). Integers
// and bool are exact.
#pragma once

#include "dtensor/tensor/dtype.h"

namespace dtensor::test {

inline double rtol_for(DType d, double float32_rtol) {
  switch (d) {
    case DType::kFloat32:
      return float32_rtol;
    case DType::kFloat64:
      return 1e-12;
    case DType::kFloat16:
      return 2e-3;
    case DType::kBFloat16:
      return 1.6e-2;
    default:
      return 0.0;
  }
}

}  // namespace dtensor::test
