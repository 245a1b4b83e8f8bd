// Backward formulas of scaled_dot_product_attention (registered in attention_strategy.cc): one
// call of the registered backward op (scaled_dot_product_attention_backward[.mask]) on the saved
// inputs, out and lse.
#include "dtensor/ops/attention/detail/attention_backward.h"

#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

namespace {

// zeros_like(x), made by a recorded primitive: in a step captured by dtensor::compile, replay
// makes it again (a tensor made in the step outside any primitive is refused by the capture).
DTensor recorded_zeros_like(const DTensor& x) {
  Tensor z[1];
  run_recorded(
      "op", "zeros_like", {}, z, 0,
      [shape = x.to_local().shape(), opts = TensorOptions(x.dtype(), x.device())](
          absl::Span<const Tensor>, absl::Span<Tensor> out) { out[0] = zeros(shape, opts); });
  return DTensor(std::move(z[0]), x.spec_ptr());
}

DTensorList sdpa_grad(const BackwardContext& c, Grads g, bool has_mask) {
  static const OpInfo& bw = ops_op("scaled_dot_product_attention_backward");
  static const OpInfo& bw_mask = ops_op("scaled_dot_product_attention_backward.mask");
  // The log-sum-exp is an output too: its gradient (zero when unused) enters ds.
  const DTensor g_lse = g[1].defined() ? g[1] : recorded_zeros_like(c.output(1));
  std::vector<const DTensor*> in = {&g[0],       &g_lse,       &c.input(0), &c.input(1),
                                    &c.input(2), &c.output(0), &c.output(1)};
  if (has_mask) in.push_back(&c.input(3));
  const ArgValue args[] = {scalar_arg(c.scalar(0)), c.arg<bool>(1), c.arg<bool>(2)};
  DTensorList grads = dispatch_multi(has_mask ? bw_mask : bw, in, args);
  if (has_mask) grads.resize(4);  // the mask receives no gradient
  return grads;
}

}  // namespace

DTensorList attention_grad(const BackwardContext& c, Grads g) {
  return sdpa_grad(c, g, /*has_mask=*/false);
}

DTensorList attention_mask_grad(const BackwardContext& c, Grads g) {
  return sdpa_grad(c, g, /*has_mask=*/true);
}

}  // namespace dtensor::detail
