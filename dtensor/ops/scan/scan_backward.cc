// Backward formulas of the scan family (registered in scan_strategy.cc).
#include "dtensor/ops/scan/detail/scan_backward.h"

#include <algorithm>
#include <limits>

#include "dtensor/autograd/function.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/common/detail/cumprod_backward.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/common/detail/reduction_backward.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

namespace {

// sort / topk / kthvalue: the values' gradient goes back to the positions the indices name.
DTensorList selected_bw(const BackwardContext& c, Grads g, int64_t dim_arg, bool keepdim) {
  if (!g[0].defined()) return {DTensor()};
  const Shape& shape = c.input_spec(0).shape();
  const int64_t dim =
      normalize_dim(c.arg<int64_t>(dim_arg),
                    std::max<int64_t>(static_cast<int64_t>(shape.size()), 1), c.op().name.c_str());
  return {detail::value_selecting_backward(g[0], c.output(1), dim, keepdim, shape)};
}

}  // namespace

// cumsum: the gradient of x[i] is the sum of g[j] over j >= i, a reversed cumsum.
DTensorList cumsum_grad(const BackwardContext& c, Grads g) {
  const int64_t dim = c.arg<int64_t>(0);
  const int64_t dims[] = {dim};
  return {flip(cumsum(flip(g[0], dims), dim), dims)};
}

DTensorList cumprod_grad(const BackwardContext& c, Grads g) {
  return {detail::cumprod_backward(g[0], c.input(0), c.arg<int64_t>(0))};
}

DTensorList values_indices_grad(const BackwardContext& c, Grads g) {
  return selected_bw(c, g, 0, true);
}

DTensorList topk_grad(const BackwardContext& c, Grads g) {
  return selected_bw(c, g, 1, true);
}

DTensorList kthvalue_grad(const BackwardContext& c, Grads g) {
  return selected_bw(c, g, 1, c.arg<bool>(2));
}

DTensorList pick_grad(const BackwardContext& c, Grads g) {
  return selected_bw(c, g, 0, c.arg<bool>(1));
}

// median(): shared evenly among the elements equal to the median, the NaN elements when it is
// NaN (PyTorch's evenly_distribute_backward).
DTensorList median_grad(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const DTensor mask = cast(equal_or_both_nan(x, c.output(0)), g[0].dtype());
  return {mask * (g[0] / sum(mask))};
}

// PyTorch's formula (FunctionsManual.cpp, logcumsumexp_backward): with rev(t) the reversed
// logcumsumexp along dim, grad_x = exp(rev(log g+ - out) + x) - exp(rev(log g- - out) + x), where
// log g+ is log|g| where g > 0 and the lowest finite value elsewhere (log g- likewise for g < 0).
DTensorList logcumsumexp_grad(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const DTensor& out = c.output(0);
  if (x.numel() == 0) return {zeros_like(x)};
  const int64_t dim =
      normalize_dim(c.arg<int64_t>(0), std::max<int64_t>(x.dim(), 1), "logcumsumexp_backward");
  const int64_t dims[] = {dim};
  const auto rev = [&](const DTensor& t) {
    return x.dim() == 0 ? t : flip(logcumsumexp(flip(t, dims), dim), dims);
  };
  const double lowest = x.dtype() == kFloat64 ? std::numeric_limits<double>::lowest()
                                              : std::numeric_limits<float>::lowest();
  const DTensor floor = full_like(g[0], Scalar(lowest));
  const DTensor log_abs = log(abs(g[0]));
  const DTensor log_pos = where(gt(g[0], Scalar(0.0)), log_abs, floor);
  const DTensor log_neg = where(lt(g[0], Scalar(0.0)), log_abs, floor);
  return {exp(rev(log_pos - out) + x) - exp(rev(log_neg - out) + x)};
}

}  // namespace dtensor::detail
