// Backward formulas of batch_norm_sums and batch_norm_affine, and of their gradient ops (the
// double backward: all registered in batch_norm_strategy.cc).
#include "dtensor/ops/norm/detail/batch_norm_backward.h"

#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"

namespace dtensor::detail {

using Grads = absl::Span<const DTensor>;

namespace {

// Row `row` of a [2, C] tensor as [1, C, 1, ...], broadcast against x [N, C, *].
DTensor channel_row(const DTensor& t, int64_t row, const DTensor& x) {
  Shape s(x.dim(), 1);
  s[1] = x.size(1);
  return reshape(select(t, 0, row), s);
}

// Every dim of an `ndim`-dim x but the channels: the per-channel sums' dims (a batch-sharded x
// leaves them Partial, reduced by the engine where they meet a Replicate operand).
std::vector<int64_t> not_channels(int64_t ndim) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < ndim; ++d) dims.push_back(d);
  return dims;
}

DTensor as_dtype(const DTensor& t, DType d) {
  return t.dtype() == d ? t : cast(t, d);
}

DTensor accumulate(const DTensor& a, const DTensor& b) {
  return a.defined() ? a + b : b;
}

}  // namespace

DTensorList batch_norm_sums_grad(const autograd::BackwardContext& c, Grads g) {
  if (!g[0].defined() || !c.needs_input_grad(0)) return {DTensor()};
  static const OpInfo& op = ops_op("batch_norm_sums_backward");
  const DTensor* in[] = {&g[0], &c.input(0)};
  return {dispatch(op, in)};
}

DTensorList batch_norm_affine_grad(const autograd::BackwardContext& c, Grads g) {
  if (!g[0].defined()) return {DTensor(), DTensor()};
  static const OpInfo& op = ops_op("batch_norm_affine_backward");
  const DTensor* in[] = {&g[0], &c.input(0), &c.input(1)};
  DTensorList grads = dispatch_multi(op, in);
  for (int64_t i = 0; i < 2; ++i) {
    if (!c.needs_input_grad(i)) grads[i] = DTensor();
  }
  return grads;
}

// grad_input = G[0][k] + 2 x G[1][k] (G the sums' gradient [2, C]): with h its gradient,
// dG = [sum h, 2 sum h x] over every dim but the channels (G's float64), dx = 2 G[1][k] h.
DTensorList batch_norm_sums_backward_grad(const autograd::BackwardContext& c, Grads g) {
  DTensorList grads(2);
  if (!g[0].defined()) return grads;
  const DTensor& sums_grad = c.input(0);
  const DTensor& x = c.input(1);
  if (c.needs_input_grad(0)) {
    const std::vector<int64_t> dims = not_channels(x.dim());
    const DTensor h = as_dtype(g[0], sums_grad.dtype());
    grads[0] = stack({sum(h, dims), sum(h * as_dtype(x, sums_grad.dtype()), dims) * 2.0});
  }
  if (c.needs_input_grad(1)) {
    grads[1] = as_dtype(g[0] * channel_row(sums_grad, 1, x) * 2.0, x.dtype());
  }
  return grads;
}

// grad_input = g f[0][k], grad_factors = [sum g x, sum g]: with a and b their gradients,
// d g = a f[0][k] + b[0][k] x + b[1][k] (batch_norm_affine(x, b)), dx = b[0][k] g,
// d factors = [sum a g, 0].
DTensorList batch_norm_affine_backward_grad(const autograd::BackwardContext& c, Grads g) {
  const DTensor& grad_out = c.input(0);
  const DTensor& x = c.input(1);
  const DTensor& factors = c.input(2);
  DTensorList grads(3);
  if (g[0].defined()) {
    if (c.needs_input_grad(0)) {
      grads[0] = as_dtype(g[0] * channel_row(factors, 0, x), grad_out.dtype());
    }
    if (c.needs_input_grad(2)) {
      const DTensor s = as_dtype(sum(g[0] * grad_out, not_channels(x.dim())), factors.dtype());
      grads[2] = stack({s, zeros_like(s)});
    }
  }
  if (g.size() > 1 && g[1].defined()) {
    if (c.needs_input_grad(0)) {
      grads[0] = accumulate(grads[0], batch_norm_affine(x, as_dtype(g[1], factors.dtype())));
    }
    if (c.needs_input_grad(1)) {
      grads[1] = as_dtype(grad_out * channel_row(g[1], 0, x), x.dtype());
    }
  }
  return grads;
}

}  // namespace dtensor::detail
