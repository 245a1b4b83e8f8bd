// batch_norm_sums kernels (batch_norm_cpu.cc, batch_norm_cuda.cu; batch_norm_no_cuda.cc throws
// when CUDA is off), called by batch_norm.cc after its checks. x is contiguous, [N, C, *]
// viewed as [n, c, l], float32 or float64 (16-bit inputs are widened to float32 first).
#pragma once

#include <cstdint>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// out [2, c] float64 on x's device: out[0][k] = sum of x[:, k, :], out[1][k] = sum of x^2.
void batch_norm_sums_cpu(const Tensor& x, int64_t n, int64_t c, int64_t l, const Tensor& out);
void batch_norm_sums_cuda(const Tensor& x, int64_t n, int64_t c, int64_t l, const Tensor& out);

// gx (x's shape and dtype, contiguous) = g[0][k] + 2 * x * g[1][k] for the elements of channel
// k; g [2, c] float64, contiguous.
void batch_norm_sums_backward_cpu(const Tensor& g, const Tensor& x, int64_t n, int64_t c, int64_t l,
                                  const Tensor& gx);
void batch_norm_sums_backward_cuda(const Tensor& g, const Tensor& x, int64_t n, int64_t c,
                                   int64_t l, const Tensor& gx);

}  // namespace dtensor::detail
