// The loss CUDA entry points when dtensor is built without CUDA (unreachable: no CUDA tensor
// can exist then).
#include "dtensor/ops/loss/detail/loss_cuda.h"

namespace dtensor::detail {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}
}  // namespace

Tensor nll_loss_cuda(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, Reduction, int64_t,
                     double, const Tensor&) {
  no_cuda("nll_loss");
}
Tensor cross_entropy_probs_cuda(const Tensor&, const Tensor&, LossLayout, Reduction, double,
                                const Tensor&) {
  no_cuda("cross_entropy");
}
Tensor nll_loss_block_cuda(const Tensor&, const Tensor&, LossLayout, const NllBlock&, const Tensor&,
                           bool) {
  no_cuda("nll_loss");
}
Tensor nll_loss_block_grad_cuda(const Tensor&, const Tensor&, const Shape&, LossLayout,
                                const NllBlock&, const Tensor&, double) {
  no_cuda("nll_loss_backward");
}
void loss_terms_cuda(const LossTerm& term, const Tensor&, const Tensor&, const Tensor&,
                     const Tensor&) {
  no_cuda(loss_name(term.kind));
}
Tensor gather_target_log_probs_cuda(const Tensor&, const Tensor&, int64_t, int64_t, int64_t,
                                    int64_t, int64_t) {
  no_cuda("gather_target_log_probs");
}
Tensor reduce_loss_cuda(const Tensor&, const Tensor&, Reduction, int64_t) {
  no_cuda("reduce_loss");
}

}  // namespace dtensor::detail
