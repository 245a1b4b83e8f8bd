// group_norm's fused op (registered in group_norm_strategy.cc; local kernels in group_norm.cc),
// used by group_norm_impl (norm_layers_impl.h) where it serves: a CPU tensor, or a CPU DTensor
// replicated or sharded on the batch (its rows: S(0) or Replicate, no communication). Channel-
// sharded DTensors and CUDA tensors keep the composition (layer_norm of x viewed [N, G, -1],
// then the per-channel affine), whose view decides channel sharding by whole groups.
#pragma once

#include <array>
#include <cstdint>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/common/detail/backward_formula.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

bool group_norm_fused_serves(const Tensor& x);
bool group_norm_fused_serves(const DTensor& x);

// torch.nn.functional.group_norm through the fused op; arguments checked by the caller.
Tensor group_norm_fused(const Tensor& x, int64_t num_groups, const Tensor& weight,
                        const Tensor& bias, double eps);
DTensor group_norm_fused(const DTensor& x, int64_t num_groups, const DTensor& weight,
                         const DTensor& bias, double eps);

// The local gradients {grad_input, grad_weight, grad_bias} (the last two defined when `mask`
// asks for them): the fused CPU kernel, or elsewhere PyTorch's formula in library ops.
std::array<Tensor, 3> group_norm_backward_local(const Tensor& grad_out, const Tensor& x,
                                                int64_t num_groups, const Tensor& weight,
                                                double eps, std::array<bool, 2> mask);
// The same in library ops, on any device (the CUDA path; the CPU kernel's test reference).
std::array<Tensor, 3> group_norm_backward_composed(const Tensor& grad_out, const Tensor& x,
                                                   int64_t num_groups, const Tensor& weight,
                                                   double eps, std::array<bool, 2> mask);

// The backward formula (group_norm_backward.cc): the gradient op group_norm_backward on
// (grad_output, input[, weight]) with the forward's args.
BackwardFormula group_norm_grad;

}  // namespace dtensor::detail
