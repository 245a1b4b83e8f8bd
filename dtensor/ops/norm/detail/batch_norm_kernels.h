// batch_norm_sums and batch_norm_affine kernels (batch_norm_cpu.cc, batch_norm_cuda.cu;
// batch_norm_no_cuda.cc throws when CUDA is off), called by batch_norm.cc after its checks. x is
// contiguous, [N, C, *] viewed as [n, c, l], float32 or float64 (16-bit inputs are widened to
// float32 first).
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

// y (x's shape and dtype, contiguous) = x * f[0][k] + f[1][k] on channel k's elements; x and f
// both float32 or both float64 (contiguous); the multiply rounded, then the add (no fused
// multiply-add, on every element alike).
void batch_norm_affine_cpu(const Tensor& x, const Tensor& f, int64_t n, int64_t c, int64_t l,
                           const Tensor& y);
void batch_norm_affine_cuda(const Tensor& x, const Tensor& f, int64_t n, int64_t c, int64_t l,
                            const Tensor& y);

// gx = g * f[0][k] (g, x, f and gx of one dtype, contiguous); sums [2, c] float64: row 0 the
// sums of g * x over channel k's elements, row 1 the sums of g.
void batch_norm_affine_backward_cpu(const Tensor& g, const Tensor& x, const Tensor& f, int64_t n,
                                    int64_t c, int64_t l, const Tensor& gx, const Tensor& sums);
void batch_norm_affine_backward_cuda(const Tensor& g, const Tensor& x, const Tensor& f, int64_t n,
                                     int64_t c, int64_t l, const Tensor& gx, const Tensor& sums);

}  // namespace dtensor::detail
