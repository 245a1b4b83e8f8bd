// Backward formulas of the copying shape ops of copy_ops.h (registered in copy_ops_strategy.cc).
#include "dtensor/ops/view/detail/copy_ops_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/detail/copy_ops.h"
#include "dtensor/ops/view/view.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

DTensorList copy_grad(const BackwardContext&, Grads g) {
  return {g[0]};
}
DTensorList flip_grad(const BackwardContext& c, Grads g) {
  return {flip(g[0], c.arg<Shape>(0))};
}
DTensorList roll_grad(const BackwardContext& c, Grads g) {
  Shape back = c.arg<Shape>(0);
  for (int64_t& s : back) s = -s;
  return {roll(g[0], back, c.arg<Shape>(1))};
}
// The gradient of each input element is the sum over its copies: g viewed as
// [r0, s0, r1, s1, ...] summed over the r's.
DTensorList repeat_grad(const BackwardContext& c, Grads g) {
  const Shape& reps = c.arg<Shape>(0);
  const Shape& in = c.input_spec(0).shape();
  const int64_t lead = static_cast<int64_t>(reps.size() - in.size());
  Shape split, summed;
  for (int64_t i = 0; i < static_cast<int64_t>(reps.size()); ++i) {
    split.insert(split.end(), {reps[i], i < lead ? 1 : in[i - lead]});
    summed.push_back(2 * i);
  }
  return {reshape(sum(reshape(g[0], split), summed), in)};
}
// Each input element's gradient is the sum over its `repeats` copies: one registered op
// (repeat_interleave_backward), whose rows keep an aligned repeated dim's shard (a reshape +
// sum here would gather it unless it divided evenly over the whole mesh).
DTensorList repeat_interleave_grad(const BackwardContext& c, Grads g) {
  static const OpInfo& bw = ops_op("repeat_interleave_backward");
  const ArgValue args[] = {c.input_spec(0).shape(), c.arg<int64_t>(0), c.arg<int64_t>(1)};
  return {dispatch(bw, {&g[0]}, args)};
}
DTensorList diagonal_grad(const BackwardContext& c, Grads g) {
  static const OpInfo& bw = ops_op("diagonal_backward");
  const ArgValue args[] = {c.input_spec(0).shape(), c.arg<int64_t>(0), c.arg<int64_t>(1),
                           c.arg<int64_t>(2)};
  return {dispatch(bw, {&g[0]}, args)};
}
// Args (input shape, repeats, dim) and (input shape, offset, dim1, dim2).
DTensorList repeat_interleave_backward_grad(const BackwardContext& c, Grads g) {
  return {repeat_interleave(g[0], c.arg<int64_t>(1), c.arg<int64_t>(2))};
}
DTensorList diagonal_backward_grad(const BackwardContext& c, Grads g) {
  return {diagonal(g[0], c.arg<int64_t>(1), c.arg<int64_t>(2), c.arg<int64_t>(3))};
}
DTensorList tril_grad(const BackwardContext& c, Grads g) {
  return {tril(g[0], c.arg<int64_t>(0))};
}
DTensorList triu_grad(const BackwardContext& c, Grads g) {
  return {triu(g[0], c.arg<int64_t>(0))};
}

}  // namespace dtensor::detail
