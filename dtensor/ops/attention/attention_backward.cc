// Backward formulas of scaled_dot_product_attention (registered in attention_strategy.cc): one
// call of the registered backward op (scaled_dot_product_attention_backward[.mask]) on the saved
// inputs, out and lse; under create_graph the same gradient written with differentiable ops.
#include "dtensor/ops/attention/detail/attention_backward.h"

#include <limits>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
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

// The keys causality hides from each query, global [L, S] (true: hidden), Replicate on q's mesh:
// query i sees keys j <= i + diagonal (0, or S - L aligned bottom-right). Made by a recorded
// primitive, as recorded_zeros_like: a captured step's replay makes it again.
DTensor causal_hidden(const DTensor& q, int64_t L, int64_t S, int64_t diagonal) {
  Tensor hidden[1];
  run_recorded("op", "causal_hidden", {}, hidden, 0,
               [L, S, diagonal, device = q.to_local().device()](absl::Span<const Tensor>,
                                                                absl::Span<Tensor> out) {
                 const TensorOptions ints(kInt64, device);
                 const Tensor rows = arange(static_cast<double>(diagonal),
                                            static_cast<double>(diagonal + L), 1.0, ints)
                                         .reshape({L, 1});
                 const Tensor cols = arange(0.0, static_cast<double>(S), 1.0, ints).reshape({1, S});
                 out[0] = gt(cols, rows);
               });
  const DeviceMesh& mesh = q.device_mesh();
  return DTensor::from_local(std::move(hidden[0]), mesh,
                             Placements(static_cast<size_t>(mesh.ndim()), Replicate()));
}

// create_graph: the gradient as the fused op computes it, written with differentiable ops (the
// fused op has no derivative), with the [B, H, L, S] probabilities materialised:
//   s = q k^T * scale (+ mask; -inf where a bool mask or causality hides the key),
//   p = exp(s - lse) (0 in a row that sees no key: lse -inf, taken as 0 there),
//   dv = p^T dO, ds = p * (dO v^T - rowsum(dO * O) + dlse), dq = ds k * scale,
//   dk = ds^T q * scale.
// lse and O are the node's saved outputs, with the history of this node: the second order
// through them runs this node's backward again (arbitrary order). Computed in lse's dtype (the
// kernels' accumulation dtype), the gradients cast back to the inputs'. A floating mask that
// requires grad gets ds summed over the dims it was broadcast along (its gradient, as PyTorch's:
// s = q k^T * scale + mask), in its dtype; it is read with its history then, so the second order
// reaches it. A bool mask (or one not requiring grad) is a constant.
DTensorList sdpa_grad_composite(const BackwardContext& c, Grads g, bool has_mask) {
  const DType acc = c.output_spec(1).dtype();
  const auto up = [acc](const DTensor& t) { return t.dtype() == acc ? t : cast(t, acc); };
  const DTensor q = up(c.input(0)), k = up(c.input(1)), v = up(c.input(2));
  const double scale = c.scalar(0).to<double>();
  const double inf = std::numeric_limits<double>::infinity();
  DTensor s = mul(matmul(q, transpose(k, 2, 3)), Scalar(scale));
  const bool mask_grad = has_mask && c.needs_input_grad(3);
  if (has_mask) {
    const DTensor m = mask_grad ? c.input(3) : c.input(3).detach();
    s = m.dtype() == kBool ? masked_fill(s, logical_not(m), Scalar(-inf)) : add(s, up(m));
  }
  const int64_t L = q.size(2), S = k.size(2);
  DTensor hidden;
  if (c.arg<bool>(1) && L > 0 && S > 0) {
    hidden = causal_hidden(q, L, S, c.arg<bool>(2) ? S - L : 0);
    s = masked_fill(s, hidden, Scalar(-inf));
  }
  const DTensor& lse = c.output(1);
  const DTensor p = exp(sub(s, unsqueeze(masked_fill(lse, isinf(lse), Scalar(0.0)), 3)));
  const int64_t last[] = {3};
  DTensor ds, dv;
  if (g[0].defined()) {
    const DTensor go = up(g[0]);
    dv = matmul(transpose(p, 2, 3), go);
    const DTensor d = sum(mul(go, up(c.output(0))), last, /*keepdim=*/true);
    ds = mul(p, sub(matmul(go, transpose(v, 2, 3)), d));
  }
  if (g[1].defined()) {
    const DTensor from_lse = mul(p, unsqueeze(up(g[1]), 3));
    ds = ds.defined() ? add(ds, from_lse) : from_lse;
  }
  const auto back = [](const DTensor& t, const DTensor& like) {
    return t.defined() && t.dtype() != like.dtype() ? cast(t, like.dtype()) : t;
  };
  DTensorList grads;
  grads.push_back(back(mul(matmul(ds, k), Scalar(scale)), c.input(0)));
  grads.push_back(back(mul(matmul(transpose(ds, 2, 3), q), Scalar(scale)), c.input(1)));
  grads.push_back(back(dv, c.input(2)));
  if (has_mask) {
    DTensor dm;
    if (mask_grad && ds.defined()) {
      // Causality hides a key whatever the mask holds there, so the mask's hidden entries get
      // no gradient (PyTorch's masked_fill backward); ds there is 0 * (dp - d), NaN where v
      // or the upstream holds an inf or NaN.
      dm = reduce_to(hidden.defined() ? masked_fill(ds, hidden, Scalar(0.0)) : ds, c.input_spec(3));
    }
    grads.push_back(dm);
  }
  return grads;
}

DTensorList sdpa_grad(const BackwardContext& c, Grads g, bool has_mask) {
  // The fused kernel does not produce ds: a floating mask requiring grad takes the composite.
  if (autograd::in_create_graph() || (has_mask && c.needs_input_grad(3))) {
    return sdpa_grad_composite(c, g, has_mask);
  }
  static const OpInfo& bw = ops_op("scaled_dot_product_attention_backward");
  static const OpInfo& bw_mask = ops_op("scaled_dot_product_attention_backward.mask");
  // The log-sum-exp is an output too: its gradient (zero when unused) enters ds, and out's is
  // zero when only lse's arrived (a second order through lse alone).
  const DTensor g_out = g[0].defined() ? g[0] : recorded_zeros_like(c.output(0));
  const DTensor g_lse = g[1].defined() ? g[1] : recorded_zeros_like(c.output(1));
  std::vector<const DTensor*> in = {&g_out,      &g_lse,       &c.input(0), &c.input(1),
                                    &c.input(2), &c.output(0), &c.output(1)};
  if (has_mask) in.push_back(&c.input(3));
  const ArgValue args[] = {scalar_arg(c.scalar(0)), c.arg<bool>(1), c.arg<bool>(2)};
  DTensorList grads = dispatch_multi(has_mask ? bw_mask : bw, in, args);
  if (has_mask) grads.resize(4);  // the mask does not require grad (or is bool)
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
