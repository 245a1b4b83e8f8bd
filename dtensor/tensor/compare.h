// Whole-tensor comparison (tests and checks).
#pragma once

#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Same shape, same dtype and every element bit-equal (NaNs compare equal to the same NaN).
bool equal(const Tensor& a, const Tensor& b);
// Same shape and |a - b| <= atol + rtol * |b| elementwise, computed in double; dtypes may
// differ. NaN matches NaN when equal_nan.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
// max |a - b| over all elements (0 for empty tensors), in double.
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace dtensor
