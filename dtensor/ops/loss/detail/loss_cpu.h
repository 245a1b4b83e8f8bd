// CPU kernels of the loss family (loss_cpu.cc), called by loss.cc after its checks; the
// counterparts of loss_cuda.h's, with the same layout and results.
#pragma once

#include <cstdint>

#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// The input seen as [outer, classes, inner] and the target as [outer, inner].
struct LossLayout {
  int64_t outer = 1;
  int64_t classes = 1;
  int64_t inner = 1;
};

// nll_loss of log-probabilities (cross_entropy passes log_softmax(logits) and its label
// smoothing), with class weights `weight` ([classes], or undefined): per element
// (1 - s) * -w[t] * lp[t] + s / C * sum_c -w[c] * lp[c]; as nll_loss_cuda.
Tensor nll_loss_cpu(const Tensor& log_probs, const Tensor& target, int64_t outer, int64_t classes,
                    int64_t inner, Reduction reduction, int64_t ignore_index, double smoothing,
                    const Tensor& weight);
// cross_entropy with class probabilities `probs` (log_probs' shape and dtype): per element
// -sum_c weight[c] * (probs[c] * (1 - smoothing) + smoothing / classes) * log_probs[c] (weight
// [classes], or undefined for all ones), in double; kMean divides by outer * inner, the number
// of elements (PyTorch's), not by the weights. As cross_entropy_probs_cuda.
Tensor cross_entropy_probs_cpu(const Tensor& log_probs, const Tensor& probs, LossLayout l,
                               Reduction reduction, double smoothing, const Tensor& weight);
// One rank's block of the registered nll_loss (nll_loss_strategy.cc): the log-probabilities
// hold the classes [class_offset, class_offset + classes) of the full class dim, `weight` the
// class weights [weight_offset, weight_offset + weight_size) as doubles (null: all ones).
struct NllBlock {
  int64_t class_offset = 0;
  const double* weight = nullptr;
  int64_t weight_offset = 0;
  int64_t ignore_index = -100;
};
// Per element -weight[t] * log_probs[t] for the targets t in the block, 0 for the others and for
// ignore_index (target's shape, log_probs' dtype). Targets outside the block, in range or not,
// are skipped.
Tensor nll_loss_block_cpu(const Tensor& log_probs, const Tensor& target, LossLayout l,
                          const NllBlock& b);
// The reduced form reads the targets once for everything the kernel needs: the loss sum, W's
// share (the weights of the counted targets in the block, their count without weights) and
// the first target outside [0, classes) that is not ignored (`bad`).
struct NllSums {
  double loss = 0;
  double weight = 0;
  bool has_bad = false;
  int64_t bad = 0;
};
NllSums nll_loss_block_sums_cpu(const Tensor& log_probs, const Tensor& target, LossLayout l,
                                const NllBlock& b, int64_t classes);
// The gradient with respect to the log-probabilities (zeros of their shape `shape`, and
// -weight[t] * grad / divisor at each counted pick); `grad` has the target's shape ('none') or
// is 0-d (a reduced loss; divisor: 1, or the mean's W).
Tensor nll_loss_block_grad_cpu(const Tensor& grad, const Tensor& target, const Shape& shape,
                               LossLayout l, const NllBlock& b, double divisor);
// gather_target_log_probs (out-of-shard and ignored targets give 0).
Tensor gather_target_log_probs_cpu(const Tensor& log_probs, const Tensor& target, int64_t outer,
                                   int64_t classes, int64_t inner, int64_t class_offset,
                                   int64_t ignore_index);
// binary_cross_entropy_with_logits without pos_weight over n contiguous elements of `dtype`
// (a floating one): the per-element loss, or with grad_input its input derivative
// (pointwise_loss_simd_cpu.cc, vectorised).
void bce_with_logits_row_cpu(DType dtype, bool grad_input, void* out, const void* x, const void* y,
                             int64_t n);

// Whether loss_sum_cpu takes `kind` (mse, l1, smooth_l1, huber, bce_with_logits).
bool loss_sum_fusable(LossKind kind);
// The sum of the per-element losses of contiguous CPU x and y of one floating dtype and shape
// (no weight, no pos_weight), in one pass without the term tensor; param is beta / delta.
double loss_sum_cpu(LossKind kind, double param, const Tensor& x, const Tensor& y);

// The input gradient of the same losses times `scale` (the incoming 0-d gradient and a mean's
// 1 / n), of contiguous CPU x and y of one floating dtype and shape, in one pass.
Tensor loss_grad_scaled_cpu(LossKind kind, double param, double scale, const Tensor& x,
                            const Tensor& y);

// reduce_loss: the sum or mean of `losses` over the non-ignored targets (or none).
Tensor reduce_loss_cpu(const Tensor& losses, const Tensor& target, Reduction reduction,
                       int64_t ignore_index);

}  // namespace dtensor::detail
