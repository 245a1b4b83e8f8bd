// Backward formulas of the pointwise losses (registered in pointwise_loss_strategy.cc): one call
// of the loss's gradient op (<name>_backward) per input that needs a gradient.
#include <string>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/detail/loss_backward.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {

using autograd::BackwardContext;

namespace {

// One gradient op call per input that needs a gradient; weight and pos_weight summed over the
// dims they were broadcast along.
DTensorList loss_backward(const OpInfo& grad_op, LossKind base, const BackwardContext& c,
                          absl::Span<const DTensor> g) {
  const LossCall call = parse_call(base, c, 0);
  std::vector<const DTensor*> in = {&g[0]};
  for (int64_t i = 0; i < c.num_inputs(); ++i) in.push_back(&c.input(i));
  DTensorList out(static_cast<size_t>(c.num_inputs()));
  for (int64_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.needs_input_grad(i)) continue;
    const int64_t wrt = i < 2 ? i : (i == 2 && call.has_weight ? 2 : 3);
    ArgList args = {wrt};
    args.insert(args.end(), c.args().begin(), c.args().end());
    const DTensor gi = dispatch(grad_op, in, args);
    out[i] = i < 2 ? gi : reduce_to(gi, c.input_spec(i));
  }
  return out;
}

}  // namespace

DTensorList pointwise_loss_formula(LossKind base, const BackwardContext& c,
                                   absl::Span<const DTensor> g) {
  // Under create_graph (autograd/create_graph.h) mse_loss's gradient with differentiable ops
  // (the gradient ops have no derivative): d input = 2 (input - target) g [/ numel for mean],
  // d target = -d input.
  if (base == LossKind::kMse && autograd::in_create_graph()) {
    const DTensor diff = c.input(0) - c.input(1);
    DTensor d = diff * g[0] * 2.0;
    if (parse_call(base, c, 0).reduction == Reduction::kMean) {
      d = d / static_cast<double>(diff.numel());
    }
    DTensorList out;
    out.push_back(c.needs_input_grad(0) ? reduce_to(d, c.input_spec(0)) : DTensor());
    out.push_back(c.needs_input_grad(1) ? reduce_to(neg(d), c.input_spec(1)) : DTensor());
    return out;
  }
  return loss_backward(ops_op(std::string(loss_name(base)) + "_backward"), base, c, g);
}

}  // namespace dtensor::detail
