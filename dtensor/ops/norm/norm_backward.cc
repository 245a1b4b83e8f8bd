// Backward formulas of layer_norm and rms_norm (registered in norm_strategy.cc).
#include "dtensor/ops/norm/detail/norm_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

namespace {

// Gradients through one fused op (layer_norm_backward / rms_norm_backward, registered in
// norm_strategy.cc): inputs (grad_output, input[, weight]) and the forward's args; outputs
// grad_input, then grad_weight and grad_bias when the forward had them. The op's kernel reruns the
// forward kernel (native_layer_norm / native_rms_norm) on the saved input for its mean and rstd,
// discarding its output (nothing beyond the input and weight is kept from forward; a
// statistics-only kernel or saving the statistics would avoid the extra work), then runs the
// local backward kernel (norm.h).
DTensorList norm_backward(const BackwardContext& c, Grads g, const char* grad_op) {
  const bool has_w = c.arg<bool>(2);
  absl::InlinedVector<const DTensor*, 3> in = {&g[0], &c.input(0)};
  if (has_w) in.push_back(&c.input(1));
  DTensorList grads = dispatch_multi(ops_op(grad_op), in, c.args());
  for (int64_t i = 0; i < static_cast<int64_t>(grads.size()); ++i) {
    if (!c.needs_input_grad(i)) grads[i] = DTensor();
  }
  return grads;
}

}  // namespace

DTensorList layer_norm_grad(const BackwardContext& c, Grads g) {
  return norm_backward(c, g, "layer_norm_backward");
}

DTensorList rms_norm_grad(const BackwardContext& c, Grads g) {
  return norm_backward(c, g, "rms_norm_backward");
}

}  // namespace dtensor::detail
