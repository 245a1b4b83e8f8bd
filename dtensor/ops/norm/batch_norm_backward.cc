// Backward formulas of batch_norm_sums and batch_norm_affine (registered in
// batch_norm_strategy.cc).
#include "dtensor/ops/norm/detail/batch_norm_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {

DTensorList batch_norm_sums_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  if (!g[0].defined() || !c.needs_input_grad(0)) return {DTensor()};
  static const OpInfo& op = ops_op("batch_norm_sums_backward");
  const DTensor* in[] = {&g[0], &c.input(0)};
  return {dispatch(op, in)};
}

DTensorList batch_norm_affine_grad(const autograd::BackwardContext& c,
                                   absl::Span<const DTensor> g) {
  if (!g[0].defined()) return {DTensor(), DTensor()};
  static const OpInfo& op = ops_op("batch_norm_affine_backward");
  const DTensor* in[] = {&g[0], &c.input(0), &c.input(1)};
  DTensorList grads = dispatch_multi(op, in);
  for (int64_t i = 0; i < 2; ++i) {
    if (!c.needs_input_grad(i)) grads[i] = DTensor();
  }
  return grads;
}

}  // namespace dtensor::detail
