// Backward formula of convolution (registered in conv_strategy.cc): PyTorch's, through the
// gradient op convolution_backward (grad_input the transposed operation of grad_output, grad_weight
// summed over the batch; the bias gradient flows through the DTensor functions' broadcast add).
#include "dtensor/ops/conv/detail/conv_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {

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

}  // namespace dtensor::detail
