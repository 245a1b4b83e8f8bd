// group_norm's fused CPU kernels (group_norm_cpu.cc), called by group_norm.cc after its checks.
// x is contiguous [N, C, *] viewed as [N, G, D, HW] (G groups of D = C / G channels of HW
// elements); weight and bias ([C], x's dtype) may be null. Float32 / float64 / 16-bit x, the
// statistics in the compute type (float32 for 16-bit), as PyTorch's CPU kernel.
#pragma once

#include <cstdint>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// y = (x - mean) * rstd * w + b per (sample, group): mean and the centred variance in two
// passes over the group (in cache), then ONE pass x * scale + shift per channel. Returns y
// (x's dtype, contiguous).
Tensor group_norm_cpu(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias,
                      double eps);

// PyTorch's group-norm backward: per (sample, group) the statistics again (x in cache), then per
// channel the two sums sum(g * (x - mean)) and sum(g) in one pass, then grad_input in one
// elementwise pass. grad_weight[c] = sum_n rstd * sum(g * (x - mean)), grad_bias[c] = sum_n
// sum(g) (defined when requested, x's dtype).
void group_norm_backward_cpu(const Tensor& grad_out, const Tensor& x, int64_t groups,
                             const Tensor& weight, double eps, Tensor& grad_input,
                             Tensor* grad_weight, Tensor* grad_bias);

}  // namespace dtensor::detail
