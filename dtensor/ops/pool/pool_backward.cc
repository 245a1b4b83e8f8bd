// Backward formulas of the pool family and of its gradient ops (registered in pool_strategy.cc).
// The gradient ops are linear in the gradient, so their own gradients (the double backward) are
// the forward ops again: the window op for <name>_backward, a gather by the indices for
// max_pool_backward. Both are differentiable DTensor ops, so every order is.
#include "dtensor/ops/pool/detail/pool_backward.h"

#include <string>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/view/view.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

DTensorList window_grad(const BackwardContext& c, Grads g) {
  if (!g[0].defined()) return {DTensor()};
  const absl::Span<const ArgValue> args = c.args();
  if (c.op().name == "pad" && std::get<std::string_view>(args[1]) == "constant") {
    Shape crop = std::get<Shape>(args[0]);
    for (int64_t& p : crop) p = -p;
    return {pad(g[0], crop, "constant", 0.0)};
  }
  const OpInfo& op = ops_op(c.op().name + "_backward");
  ArgList bw(args.begin(), args.end());
  bw.push_back(c.input_spec(0).shape());
  return {dispatch(op, {&g[0]}, bw)};
}

DTensorList max_window_grad(int64_t nd, const BackwardContext& c, Grads g) {
  if (!g[0].defined()) return {DTensor()};
  static const OpInfo& op = ops_op("max_pool_backward");
  const DTensor indices = c.output(1);
  const ArgValue args[] = {c.input_spec(0).shape(), nd};
  return {dispatch(op, {&g[0], &indices}, args)};
}

DTensorList window_backward_grad(const BackwardContext& c, Grads g) {
  if (!g[0].defined()) return {DTensor()};
  const std::string& name = c.op().name;
  const OpInfo& op = ops_op(name.substr(0, name.size() - std::string_view("_backward").size()));
  ArgList args(c.args().begin(), c.args().end() - 1);  // less the input's shape
  // Constant padding's adjoint (a crop) is linear whatever the value: its adjoint pads with 0.
  if (op.name == "pad" && std::get<std::string_view>(args[1]) == "constant") args[2] = 0.0;
  return {dispatch(op, {&g[0]}, args)};
}

// max_pool_backward(grad, indices; input shape, nd) adds grad[.., j] at the plane position
// indices[.., j]: its adjoint reads gg at those positions, a gather over the flattened planes.
DTensorList max_pool_backward_grad(const BackwardContext& c, Grads g) {
  if (!g[0].defined() || !c.needs_input_grad(0)) return {DTensor(), DTensor()};
  const int64_t nd = c.arg<int64_t>(1);
  const DTensor& indices = c.input(1);
  const Shape& out = c.input_spec(0).shape();  // grad's: the forward's output shape
  const int64_t lead = static_cast<int64_t>(out.size()) - nd;
  const auto planes = [lead](const Shape& s) {
    Shape flat(s.begin(), s.begin() + lead);
    int64_t n = 1;
    for (size_t d = static_cast<size_t>(lead); d < s.size(); ++d) n *= s[d];
    flat.push_back(n);
    return flat;
  };
  const DTensor r =
      gather(reshape(g[0], planes(g[0].shape())), lead, reshape(indices, planes(out)));
  return {reshape(r, out), DTensor()};
}

}  // namespace dtensor::detail
