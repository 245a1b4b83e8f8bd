// Backward formulas of the distance family (registered in distance_strategy.cc).
#include "dtensor/ops/distance/detail/distance_backward.h"

#include <cmath>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"

namespace dtensor::detail {
namespace {

// _cdist_backward (the gradient with respect to x1) in differentiable DTensor ops, for
// create_graph: the fused cdist_backward has no derivative. With diff = x1_i - x2_j and
// dist_ij = |diff|_p: grad_x1_i = sum_j g_ij w_ij, w = diff / dist for p 2 (as a matmul:
// x1_i sum_j c_ij - (c x2)_i, c = g / dist), sign(diff) for p 1, sign(diff) where |diff| is the
// largest for p inf, sign(diff) |diff|^(p-1) / dist^(p-1) otherwise, and 0 for p 0; 0 where
// dist is 0 and, for p < 2, where diff is 0 (PyTorch's subgradients). Divisors are made safe
// before the masking so that no 0 * inf reaches the next derivative.
DTensor cdist_backward_composite(const DTensor& grad, const DTensor& x1, const DTensor& x2,
                                 const DTensor& dist, double p) {
  if (p == 0.0) return zeros_like(x1);
  const DTensor zero_dist = eq(dist, Scalar(0.0));
  const DTensor safe_dist = where(zero_dist, ones_like(dist), dist);
  const int64_t n = x1.dim();
  if (p == 2.0) {
    const int64_t last[] = {-1};
    const DTensor c = where(zero_dist, zeros_like(dist), grad / safe_dist);
    return x1 * sum(c, last, /*keepdim=*/true) - matmul(c, x2);
  }
  const DTensor diff = unsqueeze(x1, n - 1) - unsqueeze(x2, n - 2);  // [*, P, R, M]
  DTensor w;
  if (p == 1.0) {
    w = sign(diff);
  } else if (std::isinf(p)) {
    w = sign(diff) * cast(eq(abs(diff), unsqueeze(dist, n)), diff.dtype());
  } else {
    DTensor mag = abs(diff);
    const DTensor zero_diff = eq(diff, Scalar(0.0));
    if (p < 2.0) mag = where(zero_diff, ones_like(mag), mag);
    w = sign(diff) * pow(mag, Scalar(p - 1.0)) / unsqueeze(pow(safe_dist, Scalar(p - 1.0)), n);
    if (p < 2.0) w = where(zero_diff, zeros_like(w), w);
    w = where(unsqueeze(zero_dist, n), zeros_like(w), w);
  }
  const int64_t r_dim[] = {n - 1};
  return sum(unsqueeze(grad, n) * w, r_dim);
}

}  // namespace

// derivatives.yaml: x1: _cdist_backward(grad, x1, x2, p, result); x2: _cdist_backward(grad.mT,
// x2, x1, p, result.mT).
DTensorList cdist_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  if (!g[0].defined()) return {DTensor(), DTensor()};
  const double p = c.arg<double>(0);
  const DTensor& x1 = c.input(0);
  const DTensor& x2 = c.input(1);
  const DTensor& out = c.output(0);
  const int64_t n = x1.dim();
  DTensor (*bw)(const DTensor&, const DTensor&, const DTensor&, const DTensor&, double) =
      cdist_backward;
  if (autograd::in_create_graph()) bw = cdist_backward_composite;
  return {bw(g[0], x1, x2, out, p),
          bw(transpose(g[0], n - 2, n - 1), x2, x1, transpose(out, n - 2, n - 1), p)};
}

}  // namespace dtensor::detail
