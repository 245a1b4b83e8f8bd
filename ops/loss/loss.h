// Classification losses on local tensors, and the building blocks of the class-sharded
// ("loss parallel") DTensor cross entropy.
//
// Layouts follow PyTorch: the input is [N, C], [C] (one sample, target 0-d) or [N, C, d1, ...]
// (target [N, d1, ...]); the class dim is 1 (0 for a 1-d input) and the target has the input's
// shape without it. Targets are int64 (int32 accepted). Sums are accumulated in double and the
// result has the input's dtype. Elements whose target equals ignore_index contribute 0 and are
// not counted by the mean; a mean over zero counted elements is NaN, as in PyTorch.
#pragma once

#include <cstdint>

#include "dtensor/distributed_tensor.h"
#include "tensor/tensor.h"

namespace dtensor {

// How per-element losses are combined: kNone keeps them (target's shape), kSum adds them, kMean
// divides the sum by the number of non-ignored elements. kSum and kMean give a 0-d tensor.
enum class Reduction : uint8_t { kNone, kMean, kSum };

// torch.nn.functional.cross_entropy with class-index targets:
//   loss_i = (1 - s) * -log_softmax(x)[i, t_i] + s / C * sum_c -log_softmax(x)[i, c]
// with s = label_smoothing in [0, 1]. A target outside [0, C) that is not ignore_index raises
// "[nll_loss] target 7 out of range for 5 classes".
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     Reduction reduction = Reduction::kMean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

// torch.nn.functional.nll_loss: loss_i = -log_probs[i, t_i] (no class weights).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                Reduction reduction = Reduction::kMean, int64_t ignore_index = -100);

// Loss-parallel building block: `log_probs` holds the global classes
// [class_offset, class_offset + log_probs.size(class dim)) of the full log-probabilities. The
// result (target's shape, log_probs' dtype) is log_probs[i, t_i - class_offset] where t_i falls
// in this shard, and 0 where it does not or where t_i == ignore_index. Summed over the class
// shards (an all-reduce) it is exactly the full log_probs[i, t_i], so that
// reduce_loss(-sum, target, ...) equals nll_loss on the full tensor. Targets are not
// range-checked (a shard cannot know the global class count).
Tensor gather_target_log_probs(const Tensor& log_probs, const Tensor& target,
                               int64_t class_offset = 0, int64_t ignore_index = -100);

// Applies `reduction` to per-element losses of target's shape: elements whose target is
// ignore_index are treated as 0 and not counted by the mean (kNone returns the losses with those
// elements set to 0).
Tensor reduce_loss(const Tensor& losses, const Tensor& target, Reduction reduction,
                   int64_t ignore_index = -100);

// DTensor cross entropy (same arguments and semantics as the Tensor form), composed of DTensor
// ops (amax, exp, sum, the registered gather_target pick, stack, log; loss_dtensor.cc), so it
// is differentiable and its collectives come from the sharding engine. Partial logits are
// reduced first. Batch dims sharded on a mesh dim stay sharded (the target is laid out to
// match). Loss parallel (PyTorch loss_parallel): when the class dim is sharded (S(1) of
// [N, C], S(0) of [C]), the row max is one all-reduce(max) and the sums of exp, of the target
// logit and (with label smoothing) of the logits one all-reduce(sum); the full logits are
// never gathered. Result placements: kNone - the target's batch shards; kSum - P(sum) over the
// batch-sharded mesh dims; kMean - Replicate (one all-reduce of (sum, count) over the
// batch-sharded mesh dims, exact for uneven shards and ignored targets). A target out of range
// raises "[cross_entropy] target 7 out of range for 5 classes (raised on rank R)" on every rank
// of the mesh dims where targets differ.
DTensor cross_entropy(const DTensor& logits, const DTensor& target,
                      Reduction reduction = Reduction::kMean, int64_t ignore_index = -100,
                      double label_smoothing = 0.0);

}  // namespace dtensor
