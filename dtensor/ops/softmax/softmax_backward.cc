// Backward formulas of softmax, log_softmax and softmin (registered in softmax_strategy.cc).
#include "dtensor/ops/softmax/detail/softmax_backward.h"

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"

namespace dtensor::detail {

using autograd::BackwardContext;

// softmax: dx = y (g - sum(g y)); log_softmax: dx = g - exp(y) sum(g), sums along the softmax
// dim. Each is one registered op (softmax_backward / log_softmax_backward, below) whose local
// kernel fuses the row's sum and update; sharded as forward (the softmax dim whole on a rank).
// Under create_graph (autograd/create_graph.h) the same formulas are written with
// differentiable ops (the fused ops have no derivative).
namespace {
DTensor softmax_grad_of(const BackwardContext& c, const DTensor& g, bool log) {
  const int64_t dim[] = {c.arg<int64_t>(0)};
  const DTensor& y = c.output(0);
  if (autograd::in_create_graph()) {
    return log ? g - exp(y) * sum(g, dim, true) : y * (g - sum(g * y, dim, true));
  }
  static const OpInfo& sm = ops_op("softmax_backward");
  static const OpInfo& lsm = ops_op("log_softmax_backward");
  const ArgValue args[] = {dim[0]};
  return dispatch(log ? lsm : sm, {&g, &y}, args);
}
}  // namespace

DTensorList softmax_grad(const BackwardContext& c, absl::Span<const DTensor> g) {
  return {softmax_grad_of(c, g[0], false)};
}

DTensorList log_softmax_grad(const BackwardContext& c, absl::Span<const DTensor> g) {
  return {softmax_grad_of(c, g[0], true)};
}

// softmin = softmax(-x): dx = -(y (g - sum(g y))), the softmax gradient negated.
DTensorList softmin_grad(const BackwardContext& c, absl::Span<const DTensor> g) {
  return {neg(softmax_grad_of(c, g[0], false))};
}

}  // namespace dtensor::detail
