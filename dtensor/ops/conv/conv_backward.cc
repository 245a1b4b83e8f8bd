// Backward formulas of convolution and of its gradient op convolution_backward (registered in
// conv_strategy.cc): PyTorch's. convolution's goes through the gradient op convolution_backward
// (grad_input the transposed operation of grad_output, grad_weight summed over the batch; the bias
// gradient flows through the DTensor functions' broadcast add). convolution_backward's (the double
// backward, PyTorch's _convolution_double_backward) uses convolution and convolution_backward
// again, so that every order is differentiable.
#include "dtensor/ops/conv/detail/conv_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {

namespace {

// convolution_backward(go, x, w; conv_args, need_input, need_weight): the one output asked for.
DTensor convolution_backward_one(const DTensor& go, const DTensor& x, const DTensor& w,
                                 absl::Span<const ArgValue> conv_args, bool input) {
  static const OpInfo& op = ops_op("convolution_backward");
  ArgList args(conv_args.begin(), conv_args.end());
  args.push_back(input);
  args.push_back(!input);
  return dispatch(op, {&go, &x, &w}, args);
}

}  // namespace

DTensorList convolution_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  const bool ni = c.needs_input_grad(0), nw = c.needs_input_grad(1);
  if (!g[0].defined() || (!ni && !nw)) return {DTensor(), DTensor()};
  static const OpInfo& op = ops_op("convolution_backward");
  ArgList args(c.args().begin(), c.args().end());
  args.push_back(ni);
  args.push_back(nw);
  const DTensorList r = dispatch_multi(op, {&g[0], &c.input(0), &c.input(1)}, args);
  return {ni ? r[0] : DTensor(), nw ? r[ni ? 1 : 0] : DTensor()};
}

// With y = conv(x, w) bilinear, gi = gi(go, w) and gw = gw(go, x) are its adjoints, so
// <ggi, gi> + <ggw, gw> = <go, conv(ggi, w) + conv(x, ggw)>: go's gradient is
// conv(ggi, w) + conv(x, ggw), x's is the input gradient of (go, weight ggw), w's the weight
// gradient of (go, input ggi).
DTensorList convolution_backward_grad(const autograd::BackwardContext& c,
                                      absl::Span<const DTensor> g) {
  static const OpInfo& conv = ops_op("convolution");
  const bool ni = c.arg<bool>(6), nw = c.arg<bool>(7);
  const DTensor ggi = ni ? g[0] : DTensor();
  const DTensor ggw = nw ? g[ni ? 1 : 0] : DTensor();
  const absl::Span<const ArgValue> conv_args = c.args().subspan(0, 6);
  const DTensor &go = c.input(0), &x = c.input(1), &w = c.input(2);
  DTensor d_go, d_x, d_w;
  if (c.needs_input_grad(0)) {
    if (ggi.defined()) d_go = dispatch(conv, {&ggi, &w}, conv_args);
    if (ggw.defined()) {
      const DTensor t = dispatch(conv, {&x, &ggw}, conv_args);
      d_go = d_go.defined() ? add(d_go, t) : t;
    }
  }
  if (c.needs_input_grad(1) && ggw.defined()) {
    d_x = convolution_backward_one(go, x, ggw, conv_args, true);
  }
  if (c.needs_input_grad(2) && ggi.defined()) {
    d_w = convolution_backward_one(go, ggi, w, conv_args, false);
  }
  // An input the outputs asked for do not depend on (x for grad_input alone, w for grad_weight
  // alone) gets zeros, as every input asked for gets a gradient.
  DTensor* const d[] = {&d_go, &d_x, &d_w};
  for (int64_t i = 0; i < 3; ++i) {
    if (c.needs_input_grad(i) && !d[i]->defined()) *d[i] = zeros_like(c.input_spec(i));
  }
  return {d_go, d_x, d_w};
}

}  // namespace dtensor::detail
