// clip_grad_norm_ across pipeline stages: the total norm is the norm of every stage's
// gradients together (torchtitan's clip_grad_norm_ with a pp mesh: each stage's norm, then a
// reduction over pp), so every pp rank clips by the same coefficient.
#pragma once

#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::pipelining {

// Scales the gradients of `params` (this rank's stages' parameters) in place so that their total
// norm over all stages is at most max_norm, and returns that norm before clipping, on every
// rank. Per stage mesh, sharded gradients count each shard once (one all-reduce per mesh dim
// they are sharded on), as optim::clip_grad_norm_; then one all-reduce over `pp` (sum of the
// p-th powers, or max for norm_type = inf). Every rank of the pp group calls it. Parameters
// without a gradient are ignored. A parameter shared by two stages (tied weights) would count
// twice: pipelines do not tie across stages. Non-finite norms and error_if_nonfinite as
// optim::clip_grad_norm_.
double clip_grad_norm_(const std::vector<DTensor>& params, double max_norm,
                       const CommunicatorPtr& pp, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

}  // namespace dtensor::pipelining
