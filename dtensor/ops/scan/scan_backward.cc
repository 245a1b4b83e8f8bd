// Backward formulas of the scan family (registered in scan_strategy.cc).
#include "dtensor/ops/scan/detail/scan_backward.h"

#include <algorithm>
#include <limits>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/common/detail/cumprod_backward.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/common/detail/reduction_backward.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
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

namespace {

// PyTorch's cumprod_backward for create_graph, in differentiable ops (the fused op has no
// derivative). Without zeros: the reversed cumsum of g * cumprod(x), divided by x. With zeros
// (one check on every rank: the sum is replicated) the O(n^2) form whose every derivative is
// exact, as PyTorch's twice-differentiable path: with C[i, j] the cumprod along j of the row x
// with x_i replaced by 1, grad_x[i] = sum over j >= i of g[j] C[i, j].
DTensor cumprod_backward_composite(const DTensor& g, const DTensor& x, int64_t dim) {
  if (x.dim() == 0) return g;
  dim = normalize_dim(dim, x.dim(), "cumprod_backward");
  const int64_t n = x.size(dim);
  if (n <= 1) return g;
  const int64_t dims[] = {dim};
  const Tensor zeros_found = sum(cast(eq(x, Scalar(0.0)), kFloat64)).full_tensor();
  if (zeros_found.numel() == 0 || zeros_found.item<double>() == 0) {
    return flip(cumsum(flip(g * cumprod(x, dim), dims), dim), dims) / x;
  }
  const int64_t last = x.dim() - 1;
  const DTensor row = transpose(x, dim, last);  // [..., n]
  Shape square = row.shape();                   // [..., n, n]
  square.push_back(n);
  const Placements replicated(x.device_mesh().ndim(), Replicate());
  const DTensor ar = arange(0, static_cast<double>(n), 1, x.device_mesh(), replicated);
  const DTensor col = unsqueeze(ar, 1), lin = unsqueeze(ar, 0);
  const DTensor eye = cast(eq(col, lin), x.dtype());    // [i, k]: k == i
  const DTensor upper = cast(ge(lin, col), x.dtype());  // [i, j]: j >= i
  // xs[..., i, k] = x_k, and 1 at k == i (a polynomial in x: its derivative there is 0).
  const DTensor xs = expand(unsqueeze(row, last), square);
  const DTensor skip = xs - eye * xs + eye;
  const int64_t j_dim[] = {last + 1};
  const DTensor gx =
      sum(cumprod(skip, last + 1) * upper * unsqueeze(transpose(g, dim, last), last), j_dim);
  return transpose(gx, dim, last);
}

}  // namespace

DTensorList cumprod_grad(const BackwardContext& c, Grads g) {
  if (autograd::in_create_graph()) {
    return {cumprod_backward_composite(g[0], c.input(0), c.arg<int64_t>(0))};
  }
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
