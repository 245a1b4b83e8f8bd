// The DTensor forms of the pointwise losses (registered in pointwise_loss_strategy.cc).
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"

namespace dtensor {
namespace {

using detail::LossKind;

}  // namespace

DTensor mse_loss(const DTensor& input, const DTensor& target, Reduction reduction) {
  return detail::dispatch_pointwise_loss(LossKind::kMse, 0.0, input, target, DTensor(), DTensor(),
                                         reduction);
}

DTensor l1_loss(const DTensor& input, const DTensor& target, Reduction reduction) {
  return detail::dispatch_pointwise_loss(LossKind::kL1, 0.0, input, target, DTensor(), DTensor(),
                                         reduction);
}

DTensor smooth_l1_loss(const DTensor& input, const DTensor& target, Reduction reduction,
                       double beta) {
  return detail::dispatch_pointwise_loss(LossKind::kSmoothL1, beta, input, target, DTensor(),
                                         DTensor(), reduction);
}

DTensor huber_loss(const DTensor& input, const DTensor& target, Reduction reduction, double delta) {
  return detail::dispatch_pointwise_loss(LossKind::kHuber, delta, input, target, DTensor(),
                                         DTensor(), reduction);
}

DTensor binary_cross_entropy(const DTensor& input, const DTensor& target, Reduction reduction,
                             const DTensor& weight) {
  return detail::dispatch_pointwise_loss(LossKind::kBce, 0.0, input, target, weight, DTensor(),
                                         reduction);
}

DTensor binary_cross_entropy_with_logits(const DTensor& input, const DTensor& target,
                                         Reduction reduction, const DTensor& weight,
                                         const DTensor& pos_weight) {
  return detail::dispatch_pointwise_loss(LossKind::kBceWithLogits, 0.0, input, target, weight,
                                         pos_weight, reduction);
}

DTensor kl_div(const DTensor& input, const DTensor& target, Reduction reduction, bool log_target) {
  return detail::dispatch_pointwise_loss(log_target ? LossKind::kKlDivLogTarget : LossKind::kKlDiv,
                                         0.0, input, target, DTensor(), DTensor(), reduction);
}

}  // namespace dtensor
