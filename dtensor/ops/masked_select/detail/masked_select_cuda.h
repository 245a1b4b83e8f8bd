// CUDA kernels of masked_select / nonzero (masked_select_cuda.cu; masked_select_no_cuda.cc
// raises when CUDA is off). Callers (masked_select_cpu.cc) pass contiguous CUDA tensors.
#pragma once

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// The row-major positions of the true elements of `flags` (bool, contiguous), int64 [n]: a count
// pass per block, an exclusive scan of the block counts on the host (n is read back to size the
// result) and a compaction pass that keeps the row-major order.
Tensor flatnonzero_cuda(const Tensor& flags);
// out[k][d] = the coordinate along d of linear position linear[k] in a row-major `shape`
// (out int64 [n, shape.size()]).
void unravel_cuda(const Tensor& linear, IntSpan shape, const Tensor& out);

}  // namespace dtensor::detail
