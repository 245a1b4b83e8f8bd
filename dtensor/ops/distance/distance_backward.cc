// Backward formulas of the distance family (registered in distance_strategy.cc).
#include "dtensor/ops/distance/detail/distance_backward.h"

#include "dtensor/ops/view/view.h"

namespace dtensor::detail {

// derivatives.yaml: x1: _cdist_backward(grad, x1, x2, p, result); x2: _cdist_backward(grad.mT,
// x2, x1, p, result.mT).
DTensorList cdist_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  if (!g[0].defined()) return {DTensor(), DTensor()};
  const double p = c.arg<double>(0);
  const DTensor& x1 = c.input(0);
  const DTensor& x2 = c.input(1);
  const DTensor& out = c.output(0);
  const int64_t n = x1.dim();
  return {cdist_backward(g[0], x1, x2, out, p),
          cdist_backward(transpose(g[0], n - 2, n - 1), x2, x1, transpose(out, n - 2, n - 1), p)};
}

}  // namespace dtensor::detail
