// cumprod's gradient (scan.cc; the DTensor form in scan_dtensor.cc), used by the scan family's
// registration and by reduction's backward formulas (prod): a cross-family helper, not installed.
#pragma once

#include <cstdint>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

namespace detail {
// The gradient of cumprod along dim: grad_x[i] = sum over j >= i of g[j] * prod(x[k] for
// k <= j, k != i), computed per row in O(n) without dividing by a zero (local tensors).
Tensor cumprod_backward(const Tensor& grad, const Tensor& x, int64_t dim);
// The same on DTensors (the registered op cumprod_backward, sharded as cumprod).
DTensor cumprod_backward(const DTensor& grad, const DTensor& x, int64_t dim);
}  // namespace detail

}  // namespace dtensor
