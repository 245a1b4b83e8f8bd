// Backward formulas of the indexing family's DTensor ops (registered in index_strategy.cc): each
// is written with DTensor ops (gather, scatter, scatter_add, index_select, ...), so it is
// sharded as they are.
#include "dtensor/ops/index/detail/index_backward.h"

#include <limits>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

namespace {

DTensor gather_backward(const DTensor& grad, const DTensor& index, int64_t dim,
                        const Shape& self_shape) {
  static const OpInfo& op = ops_op("gather_backward");
  const ArgValue args[] = {dim, self_shape};
  return dispatch(op, {&grad, &index}, args);
}

// A per-position count of the values reduced there, 1 where none is (no index names the position
// and self is excluded): the share divided by it is unused there, but a 0 would make it 0 / 0,
// whose NaN the gradient of the share (second order, when grad has history) would carry (as
// PyTorch's masked_fill(N == 0, 1)).
DTensor at_least_one(const DTensor& counts) {
  return masked_fill(counts, eq(counts, Scalar(0.0)), Scalar(1.0));
}

}  // namespace

DTensorList gather_backward_grad(const BackwardContext& c, Grads g) {
  return {gather(g[0], c.arg<int64_t>(0), c.input(1)), DTensor()};
}

DTensorList gather_grad(const BackwardContext& c, Grads g) {
  const Shape& shape = c.input_spec(0).shape();
  const int64_t dim =
      normalize_dim(c.arg<int64_t>(0), static_cast<int64_t>(shape.size()), "gather");
  return {gather_backward(g[0], c.input(1), dim, shape), DTensor()};
}

DTensorList scatter_add_grad(const BackwardContext& c, Grads g) {
  const int64_t dim = normalize_dim(c.arg<int64_t>(0), c.input_spec(0).ndim(), "scatter_add");
  return DTensorList{g[0], DTensor(), gather(g[0], dim, c.input(1))};
}

DTensorList scatter_grad(const BackwardContext& c, Grads g) {
  const int64_t dim = normalize_dim(c.arg<int64_t>(0), c.input_spec(0).ndim(), "scatter");
  DTensor g_self, g_src;
  if (c.needs_input_grad(0)) g_self = scatter(g[0], dim, c.input(1), Scalar(0.0));
  if (c.needs_input_grad(2)) g_src = gather(g[0], dim, c.input(1));
  return DTensorList{g_self, DTensor(), g_src};
}

DTensorList scatter_value_grad(const BackwardContext& c, Grads g) {
  const int64_t dim = normalize_dim(c.arg<int64_t>(1), c.input_spec(0).ndim(), "scatter");
  return DTensorList{scatter(g[0], dim, c.input(1), Scalar(0.0)), DTensor()};
}

// The gradients of scatter_reduce (PyTorch's scatter_reduce_backward). Without include_self,
// self's gradient is the upstream gradient with the named positions zeroed (there the output
// does not depend on self; elsewhere it is self).
DTensorList scatter_reduce_grad(const BackwardContext& c, Grads g) {
  const int64_t dim = normalize_dim(c.arg<int64_t>(0), c.input_spec(0).ndim(), "scatter_reduce");
  const ScatterReduceOp reduce = parse_scatter_reduce(c.arg<std::string_view>(1), "scatter_reduce");
  const bool include_self = c.arg<bool>(2);
  const DTensor& grad = g[0];
  const DTensor& index = c.input(1);
  const bool want_self = c.needs_input_grad(0), want_src = c.needs_input_grad(2);
  const bool self_term = want_self && include_self;  // self's gradient from the reduction
  DTensor g_self, g_src;
  if (want_self && !include_self) g_self = scatter(grad, dim, index, Scalar(0.0));
  switch (reduce) {
    case ScatterReduceOp::kSum:
      if (self_term) g_self = grad;
      if (want_src) g_src = gather(grad, dim, index);
      break;
    case ScatterReduceOp::kMean: {
      // Each value reduced into a position gets the gradient divided by that position's count.
      const DTensor counts = scatter_add(full_like(grad, Scalar(include_self ? 1.0 : 0.0)), dim,
                                         index, ones_like(c.input(2)));
      const DTensor share = grad / at_least_one(counts);
      if (self_term) g_self = share;
      if (want_src) g_src = gather(share, dim, index);
      break;
    }
    case ScatterReduceOp::kAmax:
    case ScatterReduceOp::kAmin: {
      // The gradient is split evenly among the reduced values equal to the result (an excluded
      // self takes no share). A NaN result equals none of them: every value reduced there gets
      // NaN (PyTorch's 0 * grad / 0; amax's too), not a gradient sent nowhere.
      const DType dtype = grad.dtype();
      const DTensor& src = c.input(2);
      const DTensor& result = c.output(0);
      const DTensor self_is =
          include_self ? cast(eq(c.input(0), result), dtype) : full_like(grad, Scalar(0.0));
      const DTensor src_is = cast(eq(src, gather(result, dim, index)), dtype);
      const DTensor share =
          masked_fill(grad / at_least_one(scatter_add(self_is, dim, index, src_is)), isnan(result),
                      Scalar(std::numeric_limits<double>::quiet_NaN()));
      if (self_term) g_self = self_is * share;
      if (want_src) g_src = src_is * gather(share, dim, index);
      break;
    }
    case ScatterReduceOp::kProd: {
      // grad * result / value, with the zeros handled as PyTorch: a zero self gets the product
      // of the other values (self replaced by 1); a src entry that is the only zero src entry
      // of its position gets the product with it replaced by 1; with two zeros every gradient
      // is 0.
      const DTensor& self = c.input(0);
      const DTensor& src = c.input(2);
      const DTensor& result = c.output(0);
      if (self_term) {
        const DTensor ones_at_zero = masked_fill(self, eq(self, Scalar(0.0)), Scalar(1.0));
        g_self = grad * scatter_reduce(ones_at_zero, dim, index, src, "prod", true) / ones_at_zero;
      }
      if (want_src) {
        const DTensor src_zero = eq(src, Scalar(0.0));
        const DTensor zeros_named = gather(
            scatter_add(full_like(grad, Scalar(0.0)), dim, index, cast(src_zero, grad.dtype())),
            dim, index);
        const DTensor single_zero = logical_and(src_zero, eq(zeros_named, Scalar(1.0)));
        const DTensor others = scatter_reduce(
            self, dim, index, masked_fill(src, single_zero, Scalar(1.0)), "prod", include_self);
        g_src = where(single_zero, gather(grad * others, dim, index),
                      gather(grad * result, dim, index) / masked_fill(src, src_zero, Scalar(1.0)));
      }
      break;
    }
  }
  return {g_self, DTensor(), g_src};
}

DTensorList index_add_grad(const BackwardContext& c, Grads g) {
  const int64_t dim = normalize_dim(c.arg<int64_t>(1), c.input_spec(0).ndim(), "index_add");
  DTensor g_source;
  if (c.needs_input_grad(2)) g_source = index_select(g[0], dim, c.input(1)) * c.scalar(0);
  return DTensorList{g[0], DTensor(), g_source};
}

}  // namespace dtensor::detail
