// The backward formulas of gather_target (registered in loss_strategy.cc) and nll_loss
// (nll_loss_strategy.cc).
#include "dtensor/ops/loss/detail/loss_backward.h"

#include <absl/strings/str_format.h>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

DTensorList gather_target_backward_grad(const autograd::BackwardContext& c,
                                        absl::Span<const DTensor> g) {
  static const OpInfo& pick = ops_op("gather_target");
  const ArgValue args[] = {c.arg<int64_t>(1), std::string_view("cross_entropy")};
  return {dispatch(pick, {&g[0], &c.input(1)}, args), DTensor()};
}

DTensorList gather_target_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  static const OpInfo& op = ops_op("gather_target_backward");
  const ArgValue args[] = {c.input_spec(0).shape(), c.arg<int64_t>(0)};
  const DTensor& target = c.input(1);
  return {dispatch(op, {&g[0], &target}, args), DTensor()};
}

namespace {

// d loss / d weight[c]: over the counted elements i with t_i = c, the sum of grad_i *
// -input[i, c] ('none', 'sum'), or of grad * (-input[i, c] - loss) / W ('mean', W the weight
// sum, the forward's total_weight), plus, for the mean, total_weight's own gradient g_w once
// per such element (d W / d weight[c] counts them). Composed of the registered target pick and
// its scatter, so any sharding of the input stays; it runs only when the weights require grad.
// `g` or `g_w` may be undefined (no gradient reached that output).
DTensor nll_loss_weight_grad(const autograd::BackwardContext& c, const DTensor& g,
                             const DTensor& g_w) {
  static const OpInfo& pick = ops_op("gather_target");
  static const OpInfo& scatter = ops_op("gather_target_backward");
  const DTensor& x = c.input(0);
  const DTensor& target = c.input(1);
  const int64_t ignore_index = c.arg<int64_t>(1);
  const ArgValue pick_args[] = {ignore_index, std::string_view("nll_loss")};
  const int64_t class_dim = x.dim() == 1 ? 0 : 1;
  const bool mean = parse_reduction(c.arg<std::string_view>(0), "nll_loss") == Reduction::kMean;
  DTensor per;
  if (g.defined()) {
    per = neg(dispatch(pick, {&x, &target}, pick_args));
    per = mean ? (per - c.output(0)) * (g / c.output(1)) : per * g;
  }
  if (mean && g_w.defined()) {
    // d W / d weight[c] is the number of counted elements of class c: g_w at every element
    // (the scatter drops the ignored ones).
    per = per.defined() ? per + g_w : expand(g_w, target.shape());
  }
  if (!per.defined()) return DTensor();
  const ArgValue scatter_args[] = {x.shape(), ignore_index};
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d != class_dim) dims.push_back(d);
  }
  return sum(dispatch(scatter, {&per, &target}, scatter_args), dims);
}

// Under create_graph (autograd/create_graph.h): the input's gradient composed of
// differentiable ops, -g_i w[t_i] (/ W for the mean, total_weight, whose history reaches the
// weights) scattered to [i, t_i] by gather_target_backward (its derivative in grad is the pick);
// w[t_i] is the pick of the weights expanded along the input (any class sharding stays).
DTensor nll_loss_input_grad_composite(const autograd::BackwardContext& c, const DTensor& g) {
  static const OpInfo& pick = ops_op("gather_target");
  static const OpInfo& scatter = ops_op("gather_target_backward");
  const Shape& x = c.input_spec(0).shape();
  const DTensor& target = c.input(1);
  const int64_t ignore_index = c.arg<int64_t>(1);
  DTensor per = neg(g.dim() == target.dim() ? g : expand(g, target.shape()));
  if (c.arg<bool>(2)) {
    DTensor w = c.input(2);
    for (size_t d = 2; d < x.size(); ++d) w = unsqueeze(w, -1);
    const DTensor wx = expand(w, x);
    const ArgValue pick_args[] = {ignore_index, std::string_view("nll_loss")};
    per = per * dispatch(pick, {&wx, &target}, pick_args);
  }
  if (parse_reduction(c.arg<std::string_view>(0), "nll_loss") == Reduction::kMean) {
    per = per / c.output(1);
  }
  const ArgValue scatter_args[] = {x, ignore_index};
  return dispatch(scatter, {&per, &target}, scatter_args);
}

}  // namespace

DTensorList nll_loss_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  static const OpInfo& op = ops_op("nll_loss_backward");
  const bool has_weight = c.arg<bool>(2);
  DTensorList out(static_cast<size_t>(c.num_inputs()));
  if (c.needs_input_grad(0) && g[0].defined() && autograd::in_create_graph()) {
    out[0] = nll_loss_input_grad_composite(c, g[0]);
  } else if (c.needs_input_grad(0) && g[0].defined()) {
    const ArgValue args[] = {c.input_spec(0).shape(), c.arg<std::string_view>(0), c.arg<int64_t>(1),
                             has_weight};
    // total_weight, the forward's second output, carries the mean's W: no reduction here.
    std::vector<const DTensor*> in = {&g[0], &c.input(1), &c.output(1)};
    if (has_weight) in.push_back(&c.input(2));
    out[0] = dispatch(op, in, args);
  }
  if (has_weight && c.needs_input_grad(2)) out[2] = nll_loss_weight_grad(c, g[0], g[1]);
  return out;
}

}  // namespace dtensor::detail
