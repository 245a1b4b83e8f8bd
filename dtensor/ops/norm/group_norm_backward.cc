// Backward formula of the fused group_norm op (registered in group_norm_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/ops/norm/detail/group_norm.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {

// Gradients through group_norm_backward (grad_output, input[, weight]), forward's args.
DTensorList group_norm_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  if (!g[0].defined()) return DTensorList(c.num_inputs());
  const bool has_w = c.arg<bool>(2);
  absl::InlinedVector<const DTensor*, 3> in = {&g[0], &c.input(0)};
  if (has_w) in.push_back(&c.input(1));
  static const OpInfo& op = ops_op("group_norm_backward");
  DTensorList grads = dispatch_multi(op, in, c.args());
  for (int64_t i = 0; i < static_cast<int64_t>(grads.size()); ++i) {
    if (!c.needs_input_grad(i)) grads[i] = DTensor();
  }
  return grads;
}

}  // namespace dtensor::detail
