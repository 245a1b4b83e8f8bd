// The DTensor forms of the distance family (cdist and cdist_backward registered in
// distance_strategy.cc; pairwise_distance and cosine_similarity composed of DTensor ops).
#include <algorithm>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/distance/detail/distance_backward.h"
#include "dtensor/ops/distance/detail/distance_util.h"
#include "dtensor/ops/distance/distance.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"

namespace dtensor {

// Batch dims broadcast by expanding first (the expand's gradient sums back over them).
DTensor cdist(const DTensor& x1, const DTensor& x2, double p) {
  const auto [s1, s2] = detail::cdist_broadcast(x1.shape(), x2.shape());
  if (x1.shape() != s1 || x2.shape() != s2) return cdist(expand(x1, s1), expand(x2, s2), p);
  static const OpInfo& op = ops_op("cdist");
  const ArgValue args[] = {p};
  return dispatch(op, {&x1, &x2}, args);
}

DTensor detail::cdist_backward(const DTensor& grad, const DTensor& x1, const DTensor& x2,
                               const DTensor& dist, double p) {
  static const OpInfo& op = ops_op("cdist_backward");
  const ArgValue args[] = {p};
  return dispatch(op, {&grad, &x1, &x2, &dist}, args);
}

// p 2 as sqrt(sum(d * d)): a sharded last dim leaves a Partial(sum) sum (vector_norm would
// gather it); other p through vector_norm.
DTensor pairwise_distance(const DTensor& x1, const DTensor& x2, double p, double eps,
                          bool keepdim) {
  const int64_t last[] = {std::max<int64_t>(x1.dim(), x2.dim()) - 1};
  const DTensor d = x1 - x2 + eps;
  if (p == 2.0) return sqrt(sum(d * d, last, keepdim));
  return vector_norm(d, p, last, keepdim);
}

// The norms as sqrt(sum(x * x)) (Partial(sum) over a sharded dim), clamped at eps in value only:
// PyTorch clamps them in place under no_grad, so the gradient is the unclamped norm's.
DTensor cosine_similarity(const DTensor& x1, const DTensor& x2, int64_t dim, double eps) {
  const Shape shape = broadcast_shapes(x1.shape(), x2.shape(), "cosine_similarity");
  const DTensor a = x1.shape() == shape ? x1 : expand(x1, shape);
  const DTensor b = x2.shape() == shape ? x2 : expand(x2, shape);
  const int64_t d[] = {normalize_dim(dim, static_cast<int64_t>(shape.size()), "cosine_similarity")};
  const auto norm = [&](const DTensor& x) {
    const DTensor s = sum(x * x, d, /*keepdim=*/true);
    // A zero vector's norm has gradient 0 (as linalg_vector_norm's), not sqrt's inf * 0 = NaN.
    const DTensor zero = eq(s, Scalar(0.0));
    const DTensor n = where(zero, zeros_like(s), sqrt(where(zero, full_like(s, 1.0), s)));
    return n + (clamp_min(n, Scalar(eps)) - n).detach();
  };
  return sum((a / norm(a)) * (b / norm(b)), d);
}

}  // namespace dtensor
