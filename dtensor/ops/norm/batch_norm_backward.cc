// Backward formula of batch_norm_sums (registered in batch_norm_strategy.cc).
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

}  // namespace dtensor::detail
