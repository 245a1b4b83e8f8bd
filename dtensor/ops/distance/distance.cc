// The distance family's Tensor functions: argument checks, shapes, the CPU / CUDA switch
// (kernels in distance_cpu.cc / distance_cuda.cu); pairwise_distance and cosine_similarity are
// compositions of the elementwise and reduction ops, as in PyTorch.
#include "dtensor/ops/distance/distance.h"

#include <cmath>

#include "dtensor/ops/distance/detail/distance_backward.h"
#include "dtensor/ops/distance/detail/distance_kernels.h"
#include "dtensor/ops/distance/detail/distance_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// Checks x1 [*, P, M] and x2 [*, R, M] and returns their geometry.
detail::CdistGeom cdist_geom(const Tensor& x1, const Tensor& x2, double p, const char* op) {
  DT_CHECK(x1.defined() && x2.defined(), "[%s] x1 and x2 must be defined tensors", op);
  DT_CHECK(is_floating(x1.dtype()) && x1.dtype() == x2.dtype(),
           "[%s] expected floating x1 and x2 of one dtype, got %s and %s", op,
           dtype_name(x1.dtype()), dtype_name(x2.dtype()));
  DT_CHECK(x1.dim() >= 2 && x1.dim() == x2.dim(),
           "[%s] expected x1 [*, P, M] and x2 [*, R, M] of the same rank >= 2, got %s and %s", op,
           shape_str(x1.sizes()), shape_str(x2.sizes()));
  const int64_t n = x1.dim();
  int64_t b = 1;
  for (int64_t d = 0; d < n - 2; ++d) {
    DT_CHECK(x1.size(d) == x2.size(d), "[%s] x1 %s and x2 %s must have the same batch dims", op,
             shape_str(x1.sizes()), shape_str(x2.sizes()));
    b *= x1.size(d);
  }
  DT_CHECK(x1.size(n - 1) == x2.size(n - 1),
           "[%s] x1 %s and x2 %s must have the same last dim (the vectors' size)", op,
           shape_str(x1.sizes()), shape_str(x2.sizes()));
  DT_CHECK(p >= 0 && !std::isnan(p), "[%s] p must be >= 0, got %g", op, p);
  DT_CHECK(x1.device() == x2.device(), "[%s] x1 and x2 must be on one device", op);
  return {b, x1.size(n - 2), x2.size(n - 2), x1.size(n - 1)};
}

}  // namespace

Tensor cdist(const Tensor& x1, const Tensor& x2, double p) {
  DT_CHECK(x1.defined() && x2.defined(), "[cdist] x1 and x2 must be defined tensors");
  const auto [s1, s2] = detail::cdist_broadcast(x1.sizes(), x2.sizes());
  if (x1.sizes() != s1 || x2.sizes() != s2) return cdist(x1.expand(s1), x2.expand(s2), p);
  const detail::CdistGeom g = cdist_geom(x1, x2, p, "cdist");
  // PyTorch's default compute_mode (use_mm_for_euclid_dist_if_necessary): p 2 with more than 25
  // rows on either side goes through a matmul, sqrt(max(|a|^2 + |b|^2 - 2 a.b, 0)), as
  // ATen's _euclidean_dist (less exact for near points, much faster).
  if (p == 2.0 && (g.p > 25 || g.r > 25) && g.m > 0) {
    const int64_t last[] = {-1};
    const Tensor n1 = sum(x1 * x1, last, /*keepdim=*/true);
    const Tensor n2 = sum(x2 * x2, last, /*keepdim=*/true);
    const int64_t n = x1.dim();
    const Tensor cross = matmul(x1 * Scalar(-2.0), x2.transpose(n - 2, n - 1));
    return sqrt(clamp_min(cross + n1 + n2.transpose(n - 2, n - 1), Scalar(0.0))).contiguous();
  }
  Shape shape(x1.sizes().begin(), x1.sizes().end());
  shape.back() = g.r;
  Tensor out = empty(shape, TensorOptions(x1.dtype(), x1.device()));
  (x1.device().is_cuda() ? detail::cdist_cuda : detail::cdist_cpu)(out, x1.contiguous(),
                                                                   x2.contiguous(), g, p);
  return out;
}

Tensor detail::cdist_backward(const Tensor& grad, const Tensor& x1, const Tensor& x2,
                              const Tensor& dist, double p) {
  const CdistGeom g = cdist_geom(x1, x2, p, "cdist_backward");
  Shape dshape(x1.sizes().begin(), x1.sizes().end());
  dshape.back() = g.r;
  DT_CHECK(grad.defined() && dist.defined() && grad.sizes() == dshape && dist.sizes() == dshape &&
               grad.dtype() == x1.dtype() && dist.dtype() == x1.dtype(),
           "[cdist_backward] grad and cdist must have shape %s and dtype %s", shape_str(dshape),
           dtype_name(x1.dtype()));
  if (p == 2.0 && (g.p > 25 || g.r > 25) && g.m > 0) {
    // The same sum as a matmul: sum_j c_ij (x1_i - x2_j) = x1_i sum_j c_ij - (c x2)_i with
    // c = grad / dist (0 where dist is 0).
    const Tensor c = where(eq(dist, Scalar(0.0)), zeros_like(dist), grad / dist);
    const int64_t last[] = {-1};
    return (x1 * sum(c, last, /*keepdim=*/true) - matmul(c, x2)).contiguous();
  }
  Tensor out = empty(x1.sizes(), TensorOptions(x1.dtype(), x1.device()));
  (x1.device().is_cuda() ? cdist_backward_cuda : cdist_backward_cpu)(
      out, grad.contiguous(), x1.contiguous(), x2.contiguous(), dist.contiguous(), g, p);
  return out;
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const int64_t last[] = {std::max<int64_t>(x1.dim(), x2.dim()) - 1};
  return vector_norm(x1 - x2 + Scalar(eps), p, last, keepdim);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  const Shape shape = broadcast_shapes(x1.sizes(), x2.sizes(), "cosine_similarity");
  const Tensor a = x1.expand(shape), b = x2.expand(shape);
  const int64_t d[] = {normalize_dim(dim, static_cast<int64_t>(shape.size()), "cosine_similarity")};
  const Tensor na = clamp_min(vector_norm(a, 2.0, d, true), Scalar(eps));
  const Tensor nb = clamp_min(vector_norm(b, 2.0, d, true), Scalar(eps));
  return sum((a / na) * (b / nb), d);
}

}  // namespace dtensor
