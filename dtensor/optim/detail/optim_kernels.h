// Fused local update kernels: one pass over a parameter shard and its state (CPU here, CUDA in
// optim_cuda.cu). Tensors are contiguous and share a shape; math in the parameter's compute
// type (float for 16-bit parameters), state tensors in the parameter's dtype. On meta
// parameters (a dry run) the updates do nothing.
#pragma once

#include <cstdint>

#include "dtensor/tensor/tensor.h"

namespace dtensor::optim::detail {

struct SGDStep {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first;     // the momentum buffer starts as the first update direction
  bool maximize;  // the gradient is negated before use (PyTorch's maximize)
};
// p -= lr * d with d as SGD defines it; buf updated in place when momentum != 0.
void sgd_update(const Tensor& p, const Tensor& g, const Tensor& buf, const SGDStep& s);

struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  double bias_correction1, bias_correction2;  // 1 - beta^t
  bool amsgrad;
  bool maximize;  // the gradient is negated before use (PyTorch's maximize)
};
void adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                  const Tensor& vmax, const AdamWStep& s);

// CUDA versions (optim_cuda.cu; optim_no_cuda.cc throws without CUDA).
void sgd_update_cuda(const Tensor& p, const Tensor& g, const Tensor& buf, const SGDStep& s);
void adamw_update_cuda(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                       const Tensor& vmax, const AdamWStep& s);

}  // namespace dtensor::optim::detail
