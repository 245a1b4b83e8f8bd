// Backward formulas of softmax, log_softmax and softmin (registered in softmax_strategy.cc).
#include "dtensor/ops/softmax/detail/softmax_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {

using autograd::BackwardContext;

// softmax: dx = y (g - sum(g y)); log_softmax: dx = g - exp(y) sum(g), sums along the softmax
// dim. Each is one registered op (softmax_backward / log_softmax_backward, below) whose local
// kernel fuses the row's sum and update; sharded as forward (the softmax dim whole on a rank).
DTensorList softmax_grad(const BackwardContext& c, absl::Span<const DTensor> g) {
  static const OpInfo& op = ops_op("softmax_backward");
  const ArgValue args[] = {c.arg<int64_t>(0)};
  return {dispatch(op, {&g[0], &c.output(0)}, args)};
}

DTensorList log_softmax_grad(const BackwardContext& c, absl::Span<const DTensor> g) {
  static const OpInfo& op = ops_op("log_softmax_backward");
  const ArgValue args[] = {c.arg<int64_t>(0)};
  return {dispatch(op, {&g[0], &c.output(0)}, args)};
}

// softmin = softmax(-x): dx = -(y (g - sum(g y))), the softmax gradient op negated.
DTensorList softmin_grad(const BackwardContext& c, absl::Span<const DTensor> g) {
  static const OpInfo& op = ops_op("softmax_backward");
  const ArgValue args[] = {c.arg<int64_t>(0)};
  return {neg(dispatch(op, {&g[0], &c.output(0)}, args))};
}

}  // namespace dtensor::detail
