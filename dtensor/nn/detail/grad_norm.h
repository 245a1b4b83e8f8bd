// The per-mesh parts of a gradient norm, shared by optim::clip_grad_norm_ and
// pipelining::clip_grad_norm_ (which then combine them on the host or over the pp group).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::nn::detail {

struct GradNormParts {
  std::vector<DTensor> grads;               // the parameters' defined gradients, in order
  std::map<std::string, DTensor> per_mesh;  // keyed by the mesh's description
};

// Per mesh, each gradient's local contribution (sum |g|^p, or max |g| when norm_type is inf)
// added up as a DTensor scalar whose placements say what is left to reduce (Partial over the
// mesh dims the gradient is sharded on, Replicate elsewhere): full_tensor() then reduces each
// mesh with at most one all-reduce per mesh dim, whatever the number of parameters. Parameters
// without a gradient are skipped. Runs the ops it dispatches under the caller's grad mode.
GradNormParts grad_norm_parts(const std::vector<DTensor>& params, double norm_type);

// Adds one mesh's (or stage's) reduced part to a running total: the sum of p-th powers, or the
// max for norm_type = inf. A NaN part makes the total NaN, as torch's max over the per-tensor
// norms does (std::max would keep or drop it depending on the order).
double combine_norm_parts(double total, double part, bool inf);

// The total norm from the combined parts (the p-th root unless inf); with error_if_nonfinite a
// NaN or infinite norm raises, with PyTorch's wording. The total is the same on every rank, so
// every rank raises.
double finish_norm(double total, double norm_type, bool error_if_nonfinite);

// torch.nn.utils.clip_grad_norm_ multiplies the gradients by clamp(coef, max=1), coef =
// max_norm / (norm + 1e-6): a factor of 1 changes nothing and is skipped; a NaN coefficient
// (a NaN norm) must scale, making every gradient NaN, so the test is !(coef >= 1), not coef < 1.
inline bool clip_scales(double coef) {
  return !(coef >= 1.0);
}

}  // namespace dtensor::nn::detail
