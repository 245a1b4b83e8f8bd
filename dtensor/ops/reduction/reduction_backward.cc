// Backward formulas of the reductions, written with DTensor ops. The gradient of a reduction
// is its output gradient in keepdim form, expanded back over the reduced dims (times the
// derivative of the reduction).
#include "dtensor/ops/common/detail/reduction_backward.h"

#include <absl/container/flat_hash_map.h>

#include <cmath>
#include <limits>
#include <string>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/common/detail/cumprod_backward.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"

namespace dtensor::detail {
namespace {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

constexpr uint32_t kIn0 = 1u, kOut0 = 1u;

// The reduced dims and keepdim of a reduction, from its args at (dims_arg, dims_arg + 1); an
// all-dims reduction (max/min) has neither.
struct Reduced {
  Shape dims;  // empty: every dim
  bool keepdim = false;
};

Reduced reduced_of(const BackwardContext& c, int64_t dims_arg) {
  if (dims_arg < 0) return {};
  return {c.arg<Shape>(dims_arg), c.arg<bool>(dims_arg + 1)};
}

// g in keepdim form (size-1 dims where the input was reduced).
DTensor keep(const BackwardContext& c, const DTensor& g, const Reduced& r) {
  return r.keepdim ? g : unsqueeze_reduced(g, r.dims, c.input_spec(0).ndim());
}

int64_t count_of(const BackwardContext& c, const Reduced& r) {
  const Shape& shape = c.input_spec(0).shape();
  if (r.dims.empty()) return shape_numel(shape);
  int64_t n = 1;
  for (int64_t d : r.dims) n *= shape[normalize_dim(d, static_cast<int64_t>(shape.size()), "mean")];
  return n;
}

DTensor expanded(const BackwardContext& c, const DTensor& g_keep) {
  return cast(expand(g_keep, c.input_spec(0).shape()), c.input_spec(0).dtype());
}

DTensorList sum_bw(const BackwardContext& c, Grads g) {
  return {expanded(c, keep(c, g[0], reduced_of(c, 0)))};
}

DTensorList mean_bw(const BackwardContext& c, Grads g) {
  const Reduced r = reduced_of(c, 0);
  return {expanded(c, keep(c, g[0], r) / static_cast<double>(count_of(c, r)))};
}

// var = sum((x - mean)^2) / (n - correction): d = 2 (x - mean) / (n - correction), for the
// gradient gk in keepdim form. PyTorch 2.15's var_backward: over every dim (no dims given, or a
// 0-d x) with n <= correction, where the value is inf or NaN, it gives gk * inf, NaN where x
// equals the mean (its sign does not follow x - mean); with dims given, the plain formula (2 / 0
// = inf, a negative factor for n < correction).
DTensor var_grad(const BackwardContext& c, const Reduced& r, const DTensor& gk) {
  const DTensor& x = c.input(0);
  const double denom = static_cast<double>(count_of(c, r) - c.arg<int64_t>(0));
  const DTensor centred = x - mean(x, r.dims, /*keepdim=*/true);
  if (r.dims.empty() && denom <= 0) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    // x == mean(x), as PyTorch compares (not x - mean == 0: with an inf element, inf - inf is
    // NaN while inf == inf).
    const DTensor at_mean = eq(x, mean(x, r.dims, /*keepdim=*/true));
    return gk * where(at_mean, full_like(x, Scalar(std::nan(""))), full_like(x, Scalar(kInf)));
  }
  return gk * centred * (2.0 / denom);
}

DTensorList var_bw(const BackwardContext& c, Grads g) {
  const Reduced r = reduced_of(c, 1);
  return {var_grad(c, r, keep(c, g[0], r))};
}

// amax/amin and max()/min(): the gradient is shared evenly among the elements equal to the
// extreme (PyTorch's rule for reductions without indices). A NaN result: max() / min() share it
// among the NaN elements (PyTorch's evenly_distribute_backward), amax / amin give NaN (their
// x == result mask is empty, as PyTorch's).
DTensorList extreme_bw(const BackwardContext& c, Grads g, int64_t dims_arg) {
  const Reduced r = reduced_of(c, dims_arg);
  const DTensor& x = c.input(0);
  const DTensor mask =
      cast(dims_arg < 0 ? equal_or_both_nan(x, c.output(0)) : eq(x, keep(c, c.output(0), r)),
           g[0].dtype());
  const DTensor ties = sum(mask, r.dims, /*keepdim=*/true);
  return {mask * (keep(c, g[0], r) / ties)};
}

DTensorList amax_bw(const BackwardContext& c, Grads g) {
  return extreme_bw(c, g, 0);
}
DTensorList max_all_bw(const BackwardContext& c, Grads g) {
  return extreme_bw(c, g, -1);
}

// max.dim / min.dim: the values' gradient goes to the index the forward picked.
DTensorList max_dim_bw(const BackwardContext& c, Grads g) {
  if (!g[0].defined()) return {DTensor()};
  return {value_selecting_backward(g[0], c.output(1), c.arg<int64_t>(0), c.arg<bool>(1),
                                   c.input_spec(0).shape())};
}

// std = sqrt(var): PyTorch 2.15's std_backward, var's gradient of g / (2 std), with 0 for
// g / (2 std) where std is 0 (all elements equal: 0, not 0 / 0 = NaN). Where n <= correction
// std is inf or NaN and so is the gradient. The division is by 1 where std is 0, so that
// differentiating the dropped quotient again meets no 0 * inf = NaN (its third order did).
DTensorList std_bw(const BackwardContext& c, Grads g) {
  const Reduced r = reduced_of(c, 1);
  const DTensor s = keep(c, c.output(0), r);
  const DTensor zero = eq(s, Scalar(0.0));
  const DTensor gv = keep(c, g[0], r) / (masked_fill(s, zero, Scalar(1.0)) * 2.0);
  return {var_grad(c, r, where(zero, zeros_like(gv), gv))};
}

// var_mean / std_mean: var's (or std's) gradient of g[0] plus mean's of g[1]; either may be
// undefined (an output not used).
DTensorList var_mean_bw(const BackwardContext& c, Grads g, bool is_std) {
  DTensor gx;
  if (g[0].defined()) gx = (is_std ? std_bw(c, g) : var_bw(c, g))[0];
  if (g.size() > 1 && g[1].defined()) {
    const Reduced r = reduced_of(c, 1);
    const DTensor m = expanded(c, keep(c, g[1], r) / static_cast<double>(count_of(c, r)));
    gx = gx.defined() ? gx + m : m;
  }
  return {gx};
}

DTensorList var_mean_grad(const BackwardContext& c, Grads g) {
  return var_mean_bw(c, g, false);
}
DTensorList std_mean_grad(const BackwardContext& c, Grads g) {
  return var_mean_bw(c, g, true);
}

// d logsumexp = softmax(x) = exp(x - out).
DTensorList logsumexp_bw(const BackwardContext& c, Grads g) {
  const Reduced r = reduced_of(c, 0);
  const DTensor& x = c.input(0);
  return {cast(keep(c, g[0], r) * exp(x - keep(c, c.output(0), r)), c.input_spec(0).dtype())};
}

// vector_norm: ord 2 x / out (0 where out = 0), ord 1 sign(x), ord +-inf sign(x) shared among
// the elements whose |x| equals the norm (as amax), ord 0 zero, else x |x|^(p-2) / out^(p-1).
DTensorList vector_norm_bw(const BackwardContext& c, Grads g) {
  const double ord = c.arg<double>(0);
  const Reduced r = reduced_of(c, 1);
  const DTensor& x = c.input(0);
  const DTensor gk = keep(c, g[0], r);
  const DTensor out = keep(c, c.output(0), r);
  if (ord == 0.0) return {zeros_like(x)};
  if (ord == 1.0) return {gk * sign(x)};
  if (std::isinf(ord)) {
    // A NaN element is the one selected (as PyTorch 2.15's): the others of a NaN norm get 0,
    // not 0 / 0.
    const DTensor mask = cast(logical_or(eq(abs(x), out), isnan(x)), x.dtype());
    return {gk * sign(x) * mask / sum(mask, r.dims, /*keepdim=*/true)};
  }
  DTensor d =
      ord == 2.0 ? x / out : x * pow(abs(x), Scalar(ord - 2.0)) / pow(out, Scalar(ord - 1.0));
  d = where(eq(out, Scalar(0.0)), zeros_like(d), d);
  // A zero element with ord < 2: 0 (x |x|^(ord - 2) is 0 * inf there), as PyTorch's subgradient.
  if (ord < 2.0) d = where(eq(x, Scalar(0.0)), zeros_like(d), d);
  return {gk * d};
}

// PyTorch's prod_safe_zeros_backward, for create_graph: g times the product of the elements
// before (an exclusive cumprod) and after (the same on the reversed row), written with
// differentiable ops and no division, so exact with any number of zeros at every order.
DTensor prod_along_composite(const DTensor& g, const DTensor& x, int64_t dim, bool keepdim) {
  const int64_t n = x.size(dim);
  const DTensor gk = keepdim ? g : unsqueeze(g, dim);
  if (n == 1) return gk * ones_like(x);
  const int64_t dims[] = {dim};
  const DTensor one = ones_like(narrow(x, dim, 0, 1));
  const DTensor before = cumprod(cat({one, narrow(x, dim, 0, n - 1)}, dim), dim);
  const DTensor after =
      flip(cumprod(cat({one, flip(narrow(x, dim, 1, n - 1), dims)}, dim), dim), dims);
  return gk * (before * after);
}

// prod along dim: cumprod's gradient with the output gradient at the last position of each row
// and zeros elsewhere, i.e. g times the product of the other elements, without dividing by x
// (exact where x has zeros). Under create_graph the composite above (cumprod_backward has no
// derivative).
DTensor prod_along_bw(const DTensor& g, const DTensor& x, int64_t dim, bool keepdim) {
  const int64_t n = x.size(dim);
  if (n == 0) return zeros_like(x);
  if (autograd::in_create_graph()) return prod_along_composite(g, x, dim, keepdim);
  const DTensor last =
      full(g.shape(), Scalar(n - 1), g.device_mesh(), without_partial(g.spec()), kInt64);
  return cumprod_backward(value_selecting_backward(g, last, dim, keepdim, x.shape()), x, dim);
}

DTensorList prod_dim_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  if (x.dim() == 0) return {g[0]};
  return {
      prod_along_bw(g[0], x, normalize_dim(c.arg<int64_t>(0), x.dim(), "prod"), c.arg<bool>(1))};
}

// prod of all elements: the same along dim 0 of the flattened input.
DTensorList prod_all_bw(const BackwardContext& c, Grads g) {
  const DTensor& x = c.input(0);
  const int64_t flat[] = {x.numel()};
  return {reshape(prod_along_bw(g[0], reshape(x, flat), 0, false), x.shape())};
}

// value_selecting_backward (grad, indices; args dim, keepdim, input_shape): linear in grad, whose
// gradient is the gather of the incoming one at the indices (its double backward).
DTensorList value_selecting_backward_bw(const BackwardContext& c, Grads g) {
  const int64_t dim = c.arg<int64_t>(0);
  const bool keepdim = c.arg<bool>(1);
  const DTensor& idx = c.input(1);
  const DTensor picked = gather(g[0], dim, keepdim ? idx : unsqueeze(idx, dim));
  return {keepdim ? picked : squeeze(picked, dim), DTensor()};
}

}  // namespace

ReductionGrad reduction_grad(std::string_view name) {
  static const auto* table = new absl::flat_hash_map<std::string, ReductionGrad>{
      {"sum", {sum_bw}},
      {"mean", {mean_bw}},
      {"var", {var_bw, kIn0}},
      {"amax", {amax_bw, kIn0, kOut0}},
      {"amin", {amax_bw, kIn0, kOut0}},
      {"max", {max_all_bw, kIn0, kOut0}},
      {"min", {max_all_bw, kIn0, kOut0}},
      {"max.dim", {max_dim_bw, 0, 2u}},
      {"min.dim", {max_dim_bw, 0, 2u}},
      {"std", {std_bw, kIn0, kOut0}},
      {"var_mean", {var_mean_grad, kIn0}},
      {"std_mean", {std_mean_grad, kIn0, kOut0}},
      {"prod", {prod_all_bw, kIn0}},
      {"prod.dim_int", {prod_dim_bw, kIn0}},
      {"logsumexp", {logsumexp_bw, kIn0, kOut0}},
      {"vector_norm", {vector_norm_bw, kIn0, kOut0}},
      {"value_selecting_backward", {value_selecting_backward_bw, 2u}},
  };
  auto it = table->find(std::string(name));
  return it == table->end() ? ReductionGrad{} : it->second;
}

DTensor value_selecting_backward(const DTensor& grad, const DTensor& indices, int64_t dim,
                                 bool keepdim, IntSpan input_shape) {
  static const OpInfo& op = ops_op("value_selecting_backward");
  const ArgValue args[] = {dim, keepdim, Shape(input_shape.begin(), input_shape.end())};
  return dispatch(op, {&grad, &indices}, args);
}

}  // namespace dtensor::detail
