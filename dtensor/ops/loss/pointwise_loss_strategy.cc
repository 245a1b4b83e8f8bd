// Registration of the pointwise losses (mse_loss, l1_loss, smooth_l1_loss, huber_loss,
// binary_cross_entropy, binary_cross_entropy_with_logits, kl_div) and of their gradient ops
// (<name>_backward), and the dispatch of their DTensor forms (the backward formulas are in
// pointwise_loss_backward.cc).
//
// Inputs: (input, target[, weight][, pos_weight]). Args: [0] the reduction ('none', 'mean',
// 'sum', 'batchmean'), then smooth_l1_loss [1] beta, huber_loss [1] delta, kl_div [1]
// log_target, binary_cross_entropy [1] has_weight, binary_cross_entropy_with_logits
// [1] has_weight [2] has_pos_weight. All static.
//
// Rows for one mesh dim (the loss is pointwise in input and target, which are laid out alike;
// a weight is sharded where it spans the input's dim d, replicated where it broadcasts):
//   none          [S(d) | S(d), S(d), w]
//   sum / mean    [P(sum) | S(d), S(d), w]   each rank: its shard's sum / the GLOBAL divisor
// for every dim d. Example: mse_loss(x[5, 4], y, 'mean') on 2 ranks with S(0): ranks hold 3 and
// 2 rows, each returns its sum / 20, and the all-reduce of the P(sum) is the mean; an empty
// shard returns 0. The engine adds the all-Replicate row; Partial inputs are reduced first.
//
// The gradient ops (grad, input, target[, weight][, pos_weight]; wrt, then the forward's args)
// give the gradient with respect to input (wrt 0) or target (1), or the per-element gradient of
// weight (2) or pos_weight (3) at the input's shape, which the formula sums over the weight's
// broadcast dims (reduce_to). Rows: [S(d) | S(d) or R (a reduced loss's 0-d grad), S(d), S(d),
// w]; linear in grad, so a Partial grad passes through with the rest replicated.
#include <functional>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/loss/detail/loss_backward.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {
namespace {

using Locals = absl::Span<const Tensor>;

ArgList call_args(const LossCall& call) {
  ArgList args = {std::string_view(reduction_name(call.reduction))};
  switch (call.kind) {
    case LossKind::kSmoothL1:
    case LossKind::kHuber:
      args.push_back(call.param);
      break;
    case LossKind::kKlDiv:
    case LossKind::kKlDivLogTarget:
      args.push_back(call.kind == LossKind::kKlDivLogTarget);
      break;
    case LossKind::kBce:
      args.push_back(call.has_weight);
      break;
    case LossKind::kBceWithLogits:
      args.push_back(call.has_weight);
      args.push_back(call.has_pos_weight);
      break;
    default:
      break;
  }
  return args;
}

// Operand `first` of the schema is the loss's input, then target, weight, pos_weight.
struct Operands {
  const DTensorSpec* input;
  const DTensorSpec* target;
  const DTensorSpec* weight = nullptr;
  const DTensorSpec* pos_weight = nullptr;
};

Operands operands(const OpSchema& s, const LossCall& call, int64_t first) {
  DT_CHECK(s.num_inputs() == first + call.num_inputs(),
           "[%s] expected %d DTensor inputs (%sinput, target%s%s), got %d", s.name(),
           first + call.num_inputs(), first > 0 ? "grad, " : "", call.has_weight ? ", weight" : "",
           call.has_pos_weight ? ", pos_weight" : "", s.num_inputs());
  Operands o{&s.input(first), &s.input(first + 1)};
  int64_t next = first + 2;
  if (call.has_weight) o.weight = &s.input(next++);
  if (call.has_pos_weight) o.pos_weight = &s.input(next);
  return o;
}

// Shard(k) of a weight whose dim k is aligned with the input's dim d and spans it; Replicate
// where the weight broadcasts along d (or does not reach it).
Placement aligned(const Shape& w, const Shape& x, int64_t d) {
  const int64_t k = d - static_cast<int64_t>(x.size() - w.size());
  if (k >= 0 && w[k] == x[d]) return Shard(k);
  return Replicate();
}

// `first`: 0 for the loss (output, then input, target, weights), 1 for its gradient op (the
// output, grad, then the loss's operands).
StrategyRows loss_rows(const OpSchema& s, int64_t first, bool reduced) {
  const Shape& x = s.input(first).shape();
  StrategyRows rows;
  for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) {
    Placements row;
    if (first == 0) {
      row.push_back(reduced ? Placement(Partial()) : Placement(Shard(d)));
    } else {
      row.push_back(Shard(d));
      row.push_back(reduced ? Placement(Replicate()) : Placement(Shard(d)));
    }
    row.push_back(Shard(d));
    row.push_back(Shard(d));
    for (int64_t i = first + 2; i < s.num_inputs(); ++i) {
      row.push_back(aligned(s.input(i).shape(), x, d));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

OutputMetas loss_meta(LossKind base, const OpSchema& s) {
  const LossCall call = parse_call(base, s, 0);
  const Operands o = operands(s, call, 0);
  check_pointwise_loss(call.kind, call.param, o.input->meta(), o.target->meta(),
                       o.weight ? &o.weight->meta() : nullptr,
                       o.pos_weight ? &o.pos_weight->meta() : nullptr, call.reduction);
  const bool none = call.reduction == Reduction::kNone;
  return OutputMetas{TensorMeta(none ? o.input->shape() : Shape{}, o.input->dtype())};
}

OutputMetas grad_meta(LossKind base, const OpSchema& s) {
  const int64_t wrt = s.arg<int64_t>(0);
  const LossCall call = parse_call(base, s, 1);
  const Operands o = operands(s, call, 1);
  const DTensorSpec& g = s.input(0);
  const Shape expected = call.reduction == Reduction::kNone ? o.input->shape() : Shape{};
  DT_CHECK(g.shape() == expected && g.dtype() == o.input->dtype(),
           "[%s] grad of shape %s and dtype %s, expected %s and %s (the loss's)", s.name(),
           shape_str(g.shape()), dtype_name(g.dtype()), shape_str(expected),
           dtype_name(o.input->dtype()));
  DT_CHECK(
      wrt == 0 || wrt == 1 || (wrt == 2 && call.has_weight) || (wrt == 3 && call.has_pos_weight),
      "[%s] wrt %d names no input of this call (0 input, 1 target, 2 weight, 3 pos_weight)",
      s.name(), wrt);
  return OutputMetas{o.input->meta()};
}

// The local tensors of the optional weights.
struct LocalWeights {
  Tensor weight, pos_weight;
};

LocalWeights local_weights(const LossCall& call, Locals l, int64_t first) {
  LocalWeights w;
  int64_t next = first + 2;
  if (call.has_weight) w.weight = l[next++];
  if (call.has_pos_weight) w.pos_weight = l[next];
  return w;
}

Tensor loss_kernel(LossKind base, const KernelContext& c, Locals l) {
  const LossCall call = parse_call(base, c, 0);
  const LocalWeights w = local_weights(call, l, 0);
  // A value outside [0, 1] in one rank's shard raises on every rank that may hold others (the
  // target is laid out as the input in every row, so the input's mesh dims cover it).
  if (call.kind == LossKind::kBce) {
    check_on_all_ranks(c.input_spec(0), bce_input_error(l[0], l[1]));
  }
  return pointwise_loss(call.kind, call.param, l[0], l[1], w.weight, w.pos_weight, call.reduction,
                        loss_divisor(call.reduction, c.input_spec(0).shape()));
}

LossPart part_of(int64_t wrt) {
  switch (wrt) {
    case 0:
      return LossPart::kGradInput;
    case 1:
      return LossPart::kGradTarget;
    case 2:
      return LossPart::kValue;  // d(weight * loss) / d weight
    default:
      return LossPart::kGradPosWeight;
  }
}

Tensor grad_kernel(LossKind base, const KernelContext& c, Locals l) {
  const LossCall call = parse_call(base, c, 1);
  const LocalWeights w = local_weights(call, l, 1);
  const double divisor = loss_divisor(call.reduction, c.input_spec(1).shape());
  return pointwise_loss_grad(call.kind, part_of(c.arg<int64_t>(0)), call.param, l[0], l[1], l[2],
                             w.weight, w.pos_weight, 1.0 / divisor);
}

// ---- samples -----------------------------------------------------------------------------------
// Calls on even, uneven ([3w + 1, 5]), short (an empty shard on the last rank), 0-d and empty
// inputs, one per reduction, with the weights, params and the target the gradient op is asked
// for varied across them.
struct Plan {
  Shape shape;
  Reduction reduction;
  Shape weight = {}, pos_weight = {};
  bool has_weight = false, has_pos_weight = false;
  double param = 1.0;
  bool log_target = false;
  int64_t wrt = 0;
};

std::vector<Plan> plans(LossKind base, int64_t w) {
  const int64_t n = 3 * w + 1, s = short_size(w);
  std::vector<Plan> p = {{{n, 5}, Reduction::kNone},
                         {{2, 2 * w + 1}, Reduction::kMean},
                         {{s, 3}, Reduction::kSum},
                         {{}, Reduction::kMean},
                         {{0, 3}, Reduction::kMean}};
  p[1].wrt = 1;
  switch (base) {
    case LossKind::kSmoothL1:
      p[1].param = 0.0;  // l1_loss
      p[2].param = 2.5;
      break;
    case LossKind::kHuber:
      p[1].param = 2.5;
      p[2].param = 0.5;
      break;
    case LossKind::kKlDiv:
      p[1].log_target = true;
      p[2].reduction = Reduction::kBatchMean;
      p[3].reduction = Reduction::kSum;
      break;
    case LossKind::kBce:
      // The strategy validation draws integer inputs, and bce's only integer inputs 0 and 1 put
      // its input and target gradients at 1 / 1e-12 and +-inf, where a Partial upstream gradient
      // split into shares cannot add up exactly: its gradient op is validated for weight's
      // gradient (the loss, <= 100), the input and target gradients by the gradient suites
      // (real inputs in (0, 1)).
      p[1].has_weight = true;
      p[1].weight = {2, 1};
      p[0].wrt = p[1].wrt = 2;
      [[fallthrough]];
    case LossKind::kBceWithLogits:
      p[0].has_weight = true;
      p[0].weight = {5};
      p[2].has_weight = true;
      p[2].weight = {s, 1};
      p[2].wrt = 2;
      if (base == LossKind::kBce) break;
      p[0].has_pos_weight = true;
      p[0].pos_weight = {5};
      p[1].has_pos_weight = true;
      p[1].pos_weight = {2 * w + 1};
      p[1].wrt = 3;
      break;
    default:
      break;
  }
  return p;
}

// The loss's operands of `plan`, in ranges where it is defined and smooth (bce's input in
// (0, 1), kl_div's target positive unless log_target).
std::vector<SampleInput> plan_inputs(LossKind base, const Plan& plan) {
  double xlo = -5, xhi = 5, ylo = -5, yhi = 5;
  if (base == LossKind::kBce) {
    xlo = 0.05, xhi = 0.95, ylo = 0, yhi = 1;
  } else if (base == LossKind::kBceWithLogits) {
    xlo = -4, xhi = 4, ylo = 0, yhi = 1;
  } else if (base == LossKind::kKlDiv) {
    xlo = -3, xhi = 0;
    ylo = plan.log_target ? -3 : 0.1, yhi = plan.log_target ? 0 : 2;
  }
  std::vector<SampleInput> in = {sample(plan.shape, kFloat64, xlo, xhi),
                                 sample(plan.shape, kFloat64, ylo, yhi)};
  if (plan.has_weight) in.push_back(sample(plan.weight, kFloat64, 0.5, 2));
  if (plan.has_pos_weight) in.push_back(sample(plan.pos_weight, kFloat64, 0.5, 3));
  return in;
}

LossCall plan_call(LossKind base, const Plan& plan) {
  LossCall call{plan.log_target ? LossKind::kKlDivLogTarget : base, plan.param, plan.reduction,
                plan.has_weight, plan.has_pos_weight};
  return call;
}

std::vector<OpSample> loss_samples(LossKind base, int64_t w) {
  std::vector<OpSample> out;
  for (const Plan& plan : plans(base, w)) {
    out.push_back({plan_inputs(base, plan), call_args(plan_call(base, plan))});
  }
  return out;
}

std::vector<OpSample> grad_samples(LossKind base, int64_t w) {
  std::vector<OpSample> out;
  const std::vector<Plan> all = plans(base, w);
  for (size_t i = 0; i < 3; ++i) {  // none, mean, sum (an empty shard)
    const Plan& plan = all[i];
    std::vector<SampleInput> in = plan_inputs(base, plan);
    const Shape grad = plan.reduction == Reduction::kNone ? plan.shape : Shape{};
    in.insert(in.begin(), sample(grad, kFloat64, -1, 1));
    ArgList args = {plan.wrt};
    const ArgList rest = call_args(plan_call(base, plan));
    args.insert(args.end(), rest.begin(), rest.end());
    out.push_back({std::move(in), std::move(args)});
  }
  return out;
}

void add_loss(Registry& reg, LossKind base) {
  const std::string name = loss_name(base);
  const std::string grad_name = name + "_backward";
  const size_t max_inputs = base == LossKind::kBceWithLogits ? 4 : (base == LossKind::kBce ? 3 : 2);
  std::vector<std::string> names = {"input", "target", "weight", "pos_weight"};
  names.resize(max_inputs);

  OpInfo op = detail::make_op(name, names);
  op.meta = [base](const OpSchema& s) { return loss_meta(base, s); };
  op.strategy = [base](const OpSchema& s) {
    return loss_rows(s, 0, parse_call(base, s, 0).reduction != Reduction::kNone);
  };
  op.kernel =
      single_output([base](const KernelContext& c, Locals l) { return loss_kernel(base, c, l); });
  op.backward = std::bind_front(pointwise_loss_formula, base);
  op.samples = [base](int64_t w) { return loss_samples(base, w); };
  reg.add(std::move(op));

  names.insert(names.begin(), "grad");
  OpInfo grad = gradient_op(grad_name.c_str(), names);
  grad.meta = [base](const OpSchema& s) { return grad_meta(base, s); };
  grad.strategy = [base](const OpSchema& s) {
    return loss_rows(s, 1, parse_call(base, s, 1).reduction != Reduction::kNone);
  };
  grad.kernel =
      single_output([base](const KernelContext& c, Locals l) { return grad_kernel(base, c, l); });
  grad.samples = [base](int64_t w) { return grad_samples(base, w); };
  reg.add(std::move(grad));
}

}  // namespace

DTensor dispatch_pointwise_loss(LossKind kind, double param, const DTensor& input,
                                const DTensor& target, const DTensor& weight,
                                const DTensor& pos_weight, Reduction reduction) {
  const char* name = loss_name(kind);
  DT_CHECK(input.defined(), "[%s] argument input is an undefined DTensor", name);
  DT_CHECK(target.defined(), "[%s] argument target is an undefined DTensor", name);
  const LossCall call{kind, param, reduction, weight.defined(), pos_weight.defined()};
  const ArgList args = call_args(call);
  std::vector<const DTensor*> in = {&input, &target};
  if (weight.defined()) in.push_back(&weight);
  if (pos_weight.defined()) in.push_back(&pos_weight);
  return dispatch(ops_op(name), in, args);
}

void register_pointwise_loss_ops(Registry& registry) {
  for (LossKind kind : {LossKind::kMse, LossKind::kL1, LossKind::kSmoothL1, LossKind::kHuber,
                        LossKind::kBce, LossKind::kBceWithLogits, LossKind::kKlDiv}) {
    add_loss(registry, kind);
  }
}

}  // namespace dtensor::detail
