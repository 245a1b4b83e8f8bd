// The masked_select family's internals (flatnonzero, the gradient): shared by its kernels,
// registration and tests; not installed.
#pragma once

#include "dtensor/ops/masked_select/masked_select.h"

namespace dtensor {

namespace detail {
// The linear (row-major) positions of the true elements of `flags` (bool), int64 [n].
Tensor flatnonzero(const Tensor& flags);
// The gradient of masked_select: zeros of `shape` (grad's dtype) holding grad (1-D, one element
// per true of the mask broadcast to `shape`) at the true positions, in row-major order.
Tensor masked_select_backward(const Tensor& grad, const Tensor& mask, IntSpan shape);
// The same on DTensors (the registered op masked_select_backward).
DTensor masked_select_backward(const DTensor& grad, const DTensor& mask, IntSpan shape);
}  // namespace detail

}  // namespace dtensor
