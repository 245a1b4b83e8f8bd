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

}  // namespace dtensor::nn::detail
