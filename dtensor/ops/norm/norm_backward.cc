// Backward formulas of layer_norm and rms_norm (registered in norm_strategy.cc).
#include "dtensor/ops/norm/detail/norm_backward.h"

#include <limits>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
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
// Under create_graph (autograd/create_graph.h) the same gradients written with differentiable
// ops (the fused op has no derivative), with the normalized dims D, rstd = 1 / sqrt(var + eps)
// (var of x - mean for layer_norm, mean of x^2 for rms_norm), xhat = x' rstd, gw = g w:
// dx = rstd (gw [- mean_D(gw)] - xhat mean_D(gw xhat)), dw = sum_rest(g xhat), db = sum_rest(g).
// rms_norm's default eps is the dtype's epsilon (float's below float64), as its kernel's.
DTensorList norm_backward_composite(const BackwardContext& c, Grads g, bool layer) {
  const bool has_w = c.arg<bool>(2), has_b = layer && c.arg<bool>(3);
  const DTensor& x = c.input(0);
  const int64_t nd = static_cast<int64_t>(c.arg<Shape>(1).size()), ndim = x.dim();
  std::vector<int64_t> norm_dims, rest;
  for (int64_t d = 0; d < ndim; ++d) (d < ndim - nd ? rest : norm_dims).push_back(d);
  const DTensor xc = layer ? x - mean(x, norm_dims, true) : x;
  const double eps = c.has_arg(0)            ? c.arg<double>(0)
                     : x.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                             : std::numeric_limits<float>::epsilon();
  const DTensor rstd = rsqrt(mean(xc * xc, norm_dims, true) + eps);
  const DTensor xhat = xc * rstd;
  const DTensor gw = has_w ? g[0] * c.input(1) : g[0];
  DTensor inner = gw - xhat * mean(gw * xhat, norm_dims, true);
  if (layer) inner = inner - mean(gw, norm_dims, true);
  auto over_rest = [&rest](const DTensor& t) { return rest.empty() ? t : sum(t, rest); };
  DTensorList grads;
  grads.push_back(c.needs_input_grad(0) ? rstd * inner : DTensor());
  if (has_w) grads.push_back(c.needs_input_grad(1) ? over_rest(g[0] * xhat) : DTensor());
  if (has_b) grads.push_back(c.needs_input_grad(grads.size()) ? over_rest(g[0]) : DTensor());
  return grads;
}

DTensorList norm_backward(const BackwardContext& c, Grads g, const char* grad_op) {
  const bool layer = grad_op[0] == 'l';
  if (autograd::in_create_graph()) {
    return norm_backward_composite(c, g, layer);
  }
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
