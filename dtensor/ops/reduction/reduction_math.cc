// Composite reductions: var_mean, std_mean, logsumexp, vector_norm, dist, any, all, written
// with the reduction and elementwise kernels (so their CUDA half is those kernels').
#include <cmath>
#include <limits>

#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {

namespace {

void check_floating(std::string_view op, const Tensor& x) {
  detail::check_defined(op, x, "self");
  DT_CHECK(is_floating(x.dtype()),
           "[%s] expected a floating dtype (float32, float64, float16, bfloat16), got %s "
           "(argument self)",
           op, dtype_name(x.dtype()));
}

// The number of elements a reduction over dims (empty: all) combines.
int64_t reduced_count(const Tensor& x, IntSpan dims, std::string_view op) {
  if (dims.empty()) return x.numel();
  int64_t n = 1;
  for (int64_t d : dims) n *= x.size(normalize_dim(d, x.dim(), op));
  return n;
}

}  // namespace

std::pair<Tensor, Tensor> var_mean(const Tensor& x, IntSpan dims, int64_t correction,
                                   bool keepdim) {
  check_floating("var_mean", x);
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::pair<Tensor, Tensor> std_mean(const Tensor& x, IntSpan dims, int64_t correction,
                                   bool keepdim) {
  check_floating("std_mean", x);
  return {std(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

Tensor logsumexp(const Tensor& x, IntSpan dims, bool keepdim) {
  detail::check_defined("logsumexp", x, "self");
  const Tensor xf = x.to(floating_result_type(x.dtype()));
  if (reduced_count(xf, dims, "logsumexp") == 0) {
    return log(sum(xf, dims, keepdim));  // log 0 = -inf
  }
  // An infinite max (all -inf, or a +inf) is not subtracted: x - m would be NaN there.
  Tensor m = amax(xf, dims, /*keepdim=*/true);
  m = where(isinf(m), zeros_like(m), m);
  // Summing m over its size-1 reduced dims drops them when !keepdim (and copies nothing else).
  return log(sum(exp(xf - m), dims, keepdim)) + sum(m, dims, keepdim);
}

Tensor vector_norm(const Tensor& x, double ord, IntSpan dims, bool keepdim) {
  check_floating("vector_norm", x);
  // The norm of one element is |x| for every ord but 0 (as PyTorch's; x * x overflowed for
  // |x| > 1.3e154 in float64, 1.8e19 in float32).
  if (ord != 0.0 && reduced_count(x, dims, "vector_norm") == 1) return sum(abs(x), dims, keepdim);
  if (ord == 2.0) return sqrt(sum(x * x, dims, keepdim));
  if (ord == 1.0) return sum(abs(x), dims, keepdim);
  if (std::isinf(ord)) {
    DT_CHECK(reduced_count(x, dims, "vector_norm") > 0,
             "[vector_norm] ord %g over zero elements has no identity (input shape %s)", ord,
             shape_str(x.sizes()));
    return ord > 0 ? amax(abs(x), dims, keepdim) : amin(abs(x), dims, keepdim);
  }
  if (ord == 0.0) return sum(ne(x, Scalar(0.0)), dims, keepdim).to(x.dtype());
  return pow(sum(pow(abs(x), Scalar(ord)), dims, keepdim), Scalar(1.0 / ord));
}

Tensor dist(const Tensor& a, const Tensor& b, double p) {
  return vector_norm(a - b, p);
}

Tensor any(const Tensor& x, IntSpan dims, bool keepdim) {
  detail::check_defined("any", x, "self");
  return gt(sum(ne(x, Scalar(int64_t{0})), dims, keepdim), Scalar(int64_t{0}));
}

Tensor all(const Tensor& x, IntSpan dims, bool keepdim) {
  detail::check_defined("all", x, "self");
  return eq(sum(eq(x, Scalar(int64_t{0})), dims, keepdim), Scalar(int64_t{0}));
}

}  // namespace dtensor
