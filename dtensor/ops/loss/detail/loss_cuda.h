// CUDA losses (loss_cuda.cu; loss_no_cuda.cc throws when CUDA is off). The input is seen as
// [outer, classes, inner] (contiguous after the call makes it so) and the target as
// [outer, inner], as in loss_cpu.cc; arguments are checked by the caller. Per-element losses
// are computed in double on the device and reduced there, the mean dividing by the count of
// non-ignored targets on the device. Only nll_loss_cuda reads back to the host: the target range
// flag (one small copy, which synchronises the stream), since an out-of-range target raises.
#pragma once

#include "dtensor/ops/loss/detail/loss_cpu.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"

namespace dtensor::detail {

// nll_loss of log-probabilities (cross_entropy passes log_softmax(logits) and its label
// smoothing), with class weights `weight` ([classes], or undefined); the mean divides by the sum
// of the counted elements' weights. Result dtype: log_probs'. Out-of-range targets raise
// "[nll_loss] target t out of range for C classes".
Tensor nll_loss_cuda(const Tensor& log_probs, const Tensor& target, int64_t outer, int64_t classes,
                     int64_t inner, Reduction reduction, int64_t ignore_index, double smoothing,
                     const Tensor& weight);
// cross_entropy_probs_cpu (loss_cpu.h) for CUDA tensors.
Tensor cross_entropy_probs_cuda(const Tensor& log_probs, const Tensor& probs, LossLayout l,
                                Reduction reduction, double smoothing, const Tensor& weight);
// gather_target_log_probs for CUDA tensors (no range check, out-of-shard targets give 0).
Tensor gather_target_log_probs_cuda(const Tensor& log_probs, const Tensor& target, int64_t outer,
                                    int64_t classes, int64_t inner, int64_t class_offset,
                                    int64_t ignore_index);
// nll_loss_block_cpu (or with `sum` nll_loss_block_sum_cpu's sum, a 0-d float64 on the
// device) and nll_loss_block_grad_cpu (loss_cpu.h) for CUDA tensors; `weight` is the block's
// class weights on the device (undefined: all ones; b.weight is unused).
Tensor nll_loss_block_cuda(const Tensor& log_probs, const Tensor& target, LossLayout l,
                           const NllBlock& b, const Tensor& weight, bool sum);
Tensor nll_loss_block_grad_cuda(const Tensor& grad, const Tensor& target, const Shape& shape,
                                LossLayout l, const NllBlock& b, const Tensor& weight,
                                double divisor);
// The per-element terms of a pointwise loss (pointwise_loss.h: loss_terms) written into `out`
// (x's shape and dtype, on x's device); `pw` broadcasts to x's shape or is undefined.
void loss_terms_cuda(const LossTerm& term, const Tensor& out, const Tensor& x, const Tensor& y,
                     const Tensor& pw);
// reduce_loss for CUDA tensors.
Tensor reduce_loss_cuda(const Tensor& losses, const Tensor& target, Reduction reduction,
                        int64_t ignore_index);

}  // namespace dtensor::detail
