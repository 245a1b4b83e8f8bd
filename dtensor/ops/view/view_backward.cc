// Backward formulas of the view and shape ops: each moves the gradient back the way the view
// moved the data (inverse permutation, reshape to the input's shape, sum over expanded dims,
// zeros around a slice).
#include "dtensor/ops/view/detail/view_backward.h"

#include <absl/container/flat_hash_map.h>

#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::detail {
namespace {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

DTensor select_backward(const DTensor& g, IntSpan shape, int64_t dim, int64_t index) {
  static const OpInfo& op = ops_op("select_backward");
  const ArgValue args[] = {Shape(shape.begin(), shape.end()), dim, index};
  return dispatch(op, {&g}, args);
}

DTensor slice_backward(const DTensor& g, IntSpan shape, int64_t dim, int64_t start, int64_t end,
                       int64_t step) {
  static const OpInfo& op = ops_op("slice_backward");
  const ArgValue args[] = {Shape(shape.begin(), shape.end()), dim, start, end, step};
  return dispatch(op, {&g}, args);
}

const Shape& in_shape(const BackwardContext& c) {
  return c.input_spec(0).shape();
}

DTensorList transpose_bw(const BackwardContext& c, Grads g) {
  return {transpose(g[0], c.arg<int64_t>(0), c.arg<int64_t>(1))};
}
DTensorList permute_bw(const BackwardContext& c, Grads g) {
  const Shape& dims = c.arg<Shape>(0);
  const int64_t n = static_cast<int64_t>(dims.size());
  Shape inverse(dims.size());
  for (int64_t k = 0; k < n; ++k) inverse[normalize_dim(dims[k], n, "permute")] = k;
  return {permute(g[0], inverse)};
}
DTensorList unsqueeze_bw(const BackwardContext& c, Grads g) {
  return {squeeze(g[0], c.arg<int64_t>(0))};
}
DTensorList squeeze_bw(const BackwardContext& c, Grads g) {
  DTensor out = g[0];
  for (int64_t d : c.arg<Shape>(0)) out = unsqueeze(out, d);  // ascending, normalised
  return {out};
}
DTensorList reshape_bw(const BackwardContext& c, Grads g) {
  return {reshape(g[0], in_shape(c))};
}
DTensorList expand_bw(const BackwardContext& c, Grads g) {
  return {reduce_to(g[0], c.input_spec(0))};
}
DTensorList narrow_bw(const BackwardContext& c, Grads g) {
  const int64_t dim = normalize_dim(c.arg<int64_t>(0), c.input_spec(0).ndim(), "narrow");
  const int64_t size = in_shape(c)[dim];
  int64_t start = c.arg<int64_t>(1);
  if (start < 0) start += size;
  const int64_t length = c.arg<int64_t>(2);
  if (start == 0 && length == size) return {g[0]};
  return {slice_backward(g[0], in_shape(c), dim, start, start + length, 1)};
}
DTensorList slice_bw(const BackwardContext& c, Grads g) {
  const int64_t dim = normalize_dim(c.arg<int64_t>(0), c.input_spec(0).ndim(), "slice");
  const int64_t step = c.arg<int64_t>(3);
  if (step == 1 && g[0].size(dim) == in_shape(c)[dim]) return {g[0]};
  return {slice_backward(g[0], in_shape(c), dim, c.arg<int64_t>(1), c.arg<int64_t>(2), step)};
}
DTensorList select_bw(const BackwardContext& c, Grads g) {
  return {select_backward(g[0], in_shape(c), c.arg<int64_t>(0), c.arg<int64_t>(1))};
}
DTensorList cat_bw(const BackwardContext& c, Grads g) {
  const int64_t dim = normalize_dim(c.arg<int64_t>(0), c.input_spec(0).ndim(), "cat");
  Shape sizes;
  for (int64_t i = 0; i < c.num_inputs(); ++i) sizes.push_back(c.input_spec(i).shape()[dim]);
  std::vector<DTensor> parts = split(g[0], sizes, dim);
  return DTensorList(parts.begin(), parts.end());
}
DTensorList stack_bw(const BackwardContext& c, Grads g) {
  const int64_t dim = c.arg<int64_t>(0);
  DTensorList out;
  for (int64_t i = 0; i < c.num_inputs(); ++i) out.push_back(select(g[0], dim, i));
  return out;
}
// The outputs without a gradient contribute zeros to the concatenation.
DTensorList split_bw(const BackwardContext& c, Grads g) {
  std::vector<DTensor> parts;
  for (size_t o = 0; o < g.size(); ++o) {
    if (g[o].defined()) {
      parts.push_back(g[o]);
    } else {
      parts.push_back(zeros_like(c.output_spec(static_cast<int64_t>(o))));
    }
  }
  return {cat(parts, c.arg<int64_t>(1))};
}

// select_backward / slice_backward (args: input_shape, dim, index or start, end, step): linear in
// grad, whose gradient is the forward view of the incoming one (their double backward).
DTensorList select_backward_bw(const BackwardContext& c, Grads g) {
  return {select(g[0], c.arg<int64_t>(1), c.arg<int64_t>(2))};
}
DTensorList slice_backward_bw(const BackwardContext& c, Grads g) {
  return {slice(g[0], c.arg<int64_t>(1), c.arg<int64_t>(2), c.arg<int64_t>(3), c.arg<int64_t>(4))};
}

}  // namespace

BackwardFn view_grad(std::string_view name) {
  static const auto* table = new absl::flat_hash_map<std::string, BackwardFn>{
      {"transpose", transpose_bw},
      {"permute", permute_bw},
      {"unsqueeze", unsqueeze_bw},
      {"squeeze", squeeze_bw},
      {"view", reshape_bw},
      {"reshape", reshape_bw},
      {"expand", expand_bw},
      {"narrow", narrow_bw},
      {"slice", slice_bw},
      {"select", select_bw},
      {"cat", cat_bw},
      {"stack", stack_bw},
      {"split", split_bw},
      {"select_backward", select_backward_bw},
      {"slice_backward", slice_backward_bw},
  };
  auto it = table->find(std::string(name));
  return it == table->end() ? BackwardFn() : it->second;
}

}  // namespace dtensor::detail
