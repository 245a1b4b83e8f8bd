// Backward formulas of the pointwise losses (registered in pointwise_loss_strategy.cc): one call
// of the loss's gradient op (<name>_backward) per input that needs a gradient; under
// create_graph the same gradients composed of differentiable DTensor ops.
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

// The per-element derivatives of the loss `call` with differentiable DTensor ops (the formulas
// of detail/pointwise_loss.h), for the create_graph pass: the fused gradient ops have no
// derivative. PyTorch's double backward is the derivative of the same formulas (l1's sign and
// the clamps of smooth_l1 / huber have zero or indicator derivatives, almost everywhere).
struct LossDerivs {
  const LossCall& call;
  const DTensor& x;
  const DTensor& y;
  const DTensor& pw;  // undefined: none

  DTensor diff() const { return x - y; }
  // d loss / d input.
  DTensor dx() const {
    switch (call.kind) {
      case LossKind::kMse:
        return diff() * 2.0;
      case LossKind::kL1:
        return sign(diff());
      case LossKind::kSmoothL1:
        return call.param == 0 ? sign(diff()) : clamp(diff() / call.param, -1.0, 1.0);
      case LossKind::kHuber:
        return clamp(diff(), -call.param, call.param);
      case LossKind::kBce:
        return diff() / clamp_min(x * (1.0 - x), static_cast<double>(1e-12f));
      case LossKind::kBceWithLogits:
        return pw.defined() ? ((pw - 1.0) * y + 1.0) * sigmoid(x) - pw * y : sigmoid(x) - y;
      case LossKind::kKlDiv:
        return neg(y);
      case LossKind::kKlDivLogTarget:
        return neg(exp(y));
    }
    return DTensor();
  }
  // d loss / d target (PyTorch's xlogy gradient for kl_div: log y where y != 0, plus y / y).
  DTensor dy() const {
    switch (call.kind) {
      case LossKind::kBce:
        return log(1.0 - x) - log(x);
      case LossKind::kBceWithLogits:
        return pw.defined() ? neg(x) - (pw - 1.0) * log_sigmoid(x) : neg(x);
      case LossKind::kKlDiv:
        return xlogy(cast(ne(y, Scalar(0.0)), y.dtype()), y) + y / y - x;
      case LossKind::kKlDivLogTarget:
        return exp(y) * (y - x + 1.0);
      default:
        return neg(dx());
    }
  }
  // The per-element loss (weight's derivative; only bce and bce_with_logits have a weight).
  DTensor value() const {
    if (call.kind == LossKind::kBce) {
      return (y - 1.0) * clamp_min(log(1.0 - x), -100.0) - y * clamp_min(log(x), -100.0);
    }
    const DTensor lw = pw.defined() ? (pw - 1.0) * y + 1.0 : DTensor();
    return (1.0 - y) * x - (lw.defined() ? lw * log_sigmoid(x) : log_sigmoid(x));
  }
  // d loss / d pos_weight (bce_with_logits).
  DTensor dpw() const { return neg(y) * log_sigmoid(x); }
};

// Under create_graph (autograd/create_graph.h): every input's gradient with differentiable ops,
// g times the per-element derivative times weight (but weight's own), over the mean's divisor;
// weight and pos_weight summed over their broadcast dims.
DTensorList create_graph_formula(LossKind base, const BackwardContext& c, const DTensor& g) {
  const LossCall call = parse_call(base, c, 0);
  const int64_t pw_at = call.has_weight ? 3 : 2;
  const DTensor none;
  const DTensor& weight = call.has_weight ? c.input(2) : none;
  const DTensor& pw = call.has_pos_weight ? c.input(pw_at) : none;
  const LossDerivs d{call, c.input(0), c.input(1), pw};
  const double divisor = loss_divisor(call.reduction, c.input_spec(0).shape());
  const DTensor gs = divisor == 1.0 ? g : g / divisor;
  const DTensor gw = weight.defined() ? gs * weight : gs;
  DTensorList out(static_cast<size_t>(c.num_inputs()));
  if (c.needs_input_grad(0)) out[0] = reduce_to(d.dx() * gw, c.input_spec(0));
  if (c.needs_input_grad(1)) out[1] = reduce_to(d.dy() * gw, c.input_spec(1));
  if (call.has_weight && c.needs_input_grad(2)) out[2] = reduce_to(d.value() * gs, c.input_spec(2));
  if (call.has_pos_weight && c.needs_input_grad(pw_at)) {
    out[pw_at] = reduce_to(d.dpw() * gw, c.input_spec(pw_at));
  }
  return out;
}

}  // namespace

DTensorList pointwise_loss_formula(LossKind base, const BackwardContext& c,
                                   absl::Span<const DTensor> g) {
  if (autograd::in_create_graph()) return create_graph_formula(base, c, g[0]);
  return loss_backward(ops_op(std::string(loss_name(base)) + "_backward"), base, c, g);
}

}  // namespace dtensor::detail
