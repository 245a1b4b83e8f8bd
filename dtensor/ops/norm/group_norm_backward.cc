// Backward formula of the fused group_norm op (registered in group_norm_strategy.cc).
#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/ops/norm/detail/group_norm.h"
#include "dtensor/ops/norm/detail/norm_layers_impl.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {

namespace {

// Under create_graph (autograd/create_graph.h) the gradients in differentiable DTensor ops
// (group_norm_backward_math), as layer_norm's: the fused op has no derivative.
DTensorList group_norm_grad_composite(const autograd::BackwardContext& c,
                                      absl::Span<const DTensor> g) {
  const bool has_w = c.arg<bool>(2), has_b = c.arg<bool>(3);
  std::array<DTensor, 3> gr = group_norm_backward_math(
      g[0], c.input(0), c.arg<int64_t>(1), has_w ? c.input(1) : DTensor(), c.scalar(0).to_double(),
      {has_w && c.needs_input_grad(1), has_b && c.needs_input_grad(has_w ? 2 : 1)});
  DTensorList grads;
  grads.push_back(std::move(gr[0]));
  if (has_w) grads.push_back(std::move(gr[1]));
  if (has_b) grads.push_back(std::move(gr[2]));
  return grads;
}

DTensorList group_norm_grad_fused(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  absl::InlinedVector<const DTensor*, 3> in = {&g[0], &c.input(0)};
  if (c.arg<bool>(2)) in.push_back(&c.input(1));
  static const OpInfo& op = ops_op("group_norm_backward");
  return dispatch_multi(op, in, c.args());
}

}  // namespace

// Gradients through group_norm_backward (grad_output, input[, weight]), forward's args. Each
// path returns its list whole: a list move-assigned from either branch drew GCC 12's
// -Wmaybe-uninitialized on InlinedVector's storage (a false positive the warnings gate fails).
DTensorList group_norm_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  if (!g[0].defined()) return DTensorList(c.num_inputs());
  DTensorList grads =
      autograd::in_create_graph() ? group_norm_grad_composite(c, g) : group_norm_grad_fused(c, g);
  for (int64_t i = 0; i < static_cast<int64_t>(grads.size()); ++i) {
    if (!c.needs_input_grad(i)) grads[i] = DTensor();
  }
  return grads;
}

}  // namespace dtensor::detail
