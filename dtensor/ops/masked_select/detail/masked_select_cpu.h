// CPU kernels of nonzero (masked_select_cpu.cc), the counterpart of unravel_cuda.
#pragma once

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// out[k][d] = the coordinate along d of linear position linear[k] (int64, contiguous) in a
// row-major `shape` (out int64 [n, shape.size()], contiguous, on the CPU).
void unravel_cpu(const Tensor& linear, IntSpan shape, const Tensor& out);

}  // namespace dtensor::detail
