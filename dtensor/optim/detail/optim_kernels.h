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

// Adam's and AdamW's update: weight decay decoupled (AdamW: p *= 1 - lr wd) or L2 (Adam:
// g += wd p).
struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  double bias_correction1, bias_correction2;  // 1 - beta^t
  bool amsgrad;
  bool maximize;  // the gradient is negated before use (PyTorch's maximize)
  bool decoupled_weight_decay;
};
void adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                  const Tensor& vmax, const AdamWStep& s);

struct RMSpropStep {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered;
  bool maximize;  // the gradient is negated before use (PyTorch's maximize)
};
// sq (square_avg) always; buf when momentum > 0, gavg (grad_avg) when centered, else undefined.
void rmsprop_update(const Tensor& p, const Tensor& g, const Tensor& sq, const Tensor& buf,
                    const Tensor& gavg, const RMSpropStep& s);

struct AdagradStep {
  double clr;  // lr / (1 + (t - 1) lr_decay)
  double eps, weight_decay;
  bool maximize;  // the gradient is negated before use (PyTorch's maximize)
};
void adagrad_update(const Tensor& p, const Tensor& g, const Tensor& sum, const AdagradStep& s);

// CUDA versions (optim_cuda.cu; optim_no_cuda.cc throws without CUDA).
void sgd_update_cuda(const Tensor& p, const Tensor& g, const Tensor& buf, const SGDStep& s);
void adamw_update_cuda(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                       const Tensor& vmax, const AdamWStep& s);
void rmsprop_update_cuda(const Tensor& p, const Tensor& g, const Tensor& sq, const Tensor& buf,
                         const Tensor& gavg, const RMSpropStep& s);
void adagrad_update_cuda(const Tensor& p, const Tensor& g, const Tensor& sum, const AdagradStep& s);

}  // namespace dtensor::optim::detail
