// Registration of the loss family's DTensor ops: the pointwise losses
// (pointwise_loss_strategy.cc), nll_loss (nll_loss_strategy.cc) and gather_target(input,
// target; ignore_index[, op]), the building block of the DTensor cross_entropy (loss_dtensor.cc)
// and of nll_loss's weight gradient (`op`, when given, is the name their range errors carry:
// "nll_loss", else "cross_entropy"). For input [N, C, d...]
// (or [C]) and target [N, d...] (or []), output[i] = input[i, target[i]] (0 where the target is
// ignore_index). Rows for one mesh dim:
//   [P(sum) | S(class dim), R]     class-sharded input: each rank picks the targets that fall in
//                                  its class block (0 elsewhere); the sum over ranks is the pick
//   [S(k) | S(d), S(k)]            a batch/spatial dim d of the input, dim k of the target
// It is linear in the input (P(sum) inputs pass through).
#include <absl/strings/str_format.h>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/loss/detail/loss_backward.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using detail::gather_target_grad;

int64_t class_dim_of(int64_t input_ndim) {
  return input_ndim == 1 ? 0 : 1;
}

// gather_target's rows (see the top of the file) for an input of `nd` dims, [output | input,
// target]; `reversed`, gather_target_backward's, [grad_input | grad, target]: the input's and
// the output's places swapped, with a replicated grad in the class-sharded row (the op's
// linearity adds the Partial ones).
StrategyRows gather_target_rows(int64_t nd, bool reversed) {
  const int64_t class_dim = class_dim_of(nd);
  StrategyRows rows = {reversed ? Placements{Shard(class_dim), Replicate(), Replicate()}
                                : Placements{Partial(), Shard(class_dim), Replicate()}};
  for (int64_t d = 0; d < nd; ++d) {
    if (d == class_dim) continue;
    const Placement in = Shard(d);
    const Placement out = Shard(d < class_dim ? d : d - 1);
    rows.push_back(reversed ? Placements{in, out, out} : Placements{out, in, out});
  }
  return rows;
}

// The first target outside [0, classes) that is not ignore_index, as an error message of `op`
// (empty when there is none).
std::string target_range_error(const Tensor& target, int64_t classes, int64_t ignore_index,
                               std::string_view op) {
  const Tensor t = target.to(Device(kCPU), kInt64).contiguous();
  const int64_t* p = t.numel() > 0 ? t.data<int64_t>() : nullptr;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != ignore_index && (p[i] < 0 || p[i] >= classes)) {
      return absl::StrFormat("[%s] target %d out of range for %d classes", op, p[i], classes);
    }
  }
  return "";
}

Tensor gather_target_kernel(const KernelContext& c, absl::Span<const Tensor> l) {
  const DTensorSpec& input = c.input_spec(0);
  const int64_t class_dim = class_dim_of(input.ndim());
  const int64_t ignore_index = c.arg<int64_t>(0);
  const std::string_view op = c.has_arg(1) ? c.arg<std::string_view>(1) : "cross_entropy";
  // Every rank that could hold a different target takes part, so all raise together.
  check_on_all_ranks(c.input_spec(1),
                     target_range_error(l[1], input.shape()[class_dim], ignore_index, op));
  return gather_target_log_probs(l[0], l[1], c.input_shard(0).offset[class_dim], ignore_index);
}

// gather_target_backward(grad[target shape], target; input_shape, ignore_index): zeros of the
// input's shape with grad[i] at [i, target[i]]. Rows as gather_target's, reversed: the class
// dim sharded in the output (each rank writes the targets of its block), batch dims sharded
// alike; linear in the gradient.
Tensor gather_target_backward_kernel(const KernelContext& c, absl::Span<const Tensor> l) {
  const LocalShard out = c.output_shard(0);
  const int64_t class_dim = class_dim_of(static_cast<int64_t>(out.shape.size()));
  const int64_t ignore_index = c.arg<int64_t>(1);
  // Ignored targets point nowhere (-1 is below every block).
  const Tensor t = l[1].to(kInt64);
  const Tensor idx =
      where(eq(t, Scalar(ignore_index)), full({}, -1, TensorOptions(kInt64, t.device())), t);
  return scatter_add_shard(out.shape, class_dim, idx.unsqueeze(class_dim),
                           l[0].unsqueeze(class_dim), out.offset[class_dim]);
}

void register_gather_target_backward(Registry& registry) {
  OpInfo op = detail::gradient_op("gather_target_backward", {"grad", "target"});
  op.meta = [](const OpSchema& s) {
    return OutputMetas{TensorMeta(s.arg<Shape>(0), s.input(0).dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    // The input's dims: the target's and the class dim.
    return gather_target_rows(s.input(1).ndim() + 1, /*reversed=*/true);
  };
  op.kernel = single_output(gather_target_backward_kernel);
  // Linear in grad: its gradient is the target pick of the incoming one (create_graph).
  op.differentiable = true;
  op.saved_inputs = 2u;  // target
  op.backward = detail::gather_target_backward_grad;
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t c = 2 * w + 1, n = 3 * w + 1;
    return std::vector<OpSample>{
        {{sample({n}), sample({n}, kInt64, 0, c - 1)}, {Shape{n, c}, int64_t{-100}}},
        {{sample({w + 1, 2}), sample({w + 1, 2}, kInt64, 0, 4)}, {Shape{w + 1, 5, 2}, int64_t{2}}},
        {{sample({}), sample({}, kInt64, 0, c - 1)}, {Shape{c}, int64_t{-100}}},
        {{sample({detail::short_size(w)}), sample({detail::short_size(w)}, kInt64, 0, c - 1)},
         {Shape{detail::short_size(w), c}, int64_t{-100}}}};
  };
  registry.add(std::move(op));
}

}  // namespace

void register_loss_ops(Registry& registry) {
  OpInfo op = detail::make_op("gather_target", {"input", "target"}, Linearity::kLinearInFirst);
  op.meta = [](const OpSchema& s) {
    const DTensorSpec& x = s.input(0);
    const DTensorSpec& t = s.input(1);
    DT_CHECK(is_floating(x.dtype()),
             "[cross_entropy] argument input has dtype %s, expected a "
             "floating dtype",
             dtype_name(x.dtype()));
    detail::check_index_dtype("cross_entropy", t.dtype(), "target");
    DT_CHECK(x.ndim() >= 1,
             "[cross_entropy] argument input is 0-d, expected [C], [N, C] or "
             "[N, C, ...]");
    Shape expected = x.shape();
    expected.erase(expected.begin() + class_dim_of(x.ndim()));
    DT_CHECK(t.shape() == expected,
             "[cross_entropy] argument target has shape %s, expected %s for input of shape %s",
             shape_str(t.shape()), shape_str(expected), shape_str(x.shape()));
    return OutputMetas{TensorMeta(t.shape(), x.dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    return gather_target_rows(s.input(0).ndim(), /*reversed=*/false);
  };
  op.kernel = single_output(gather_target_kernel);
  op.backward = gather_target_grad;
  op.saved_inputs = 2u;  // target
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t c = 2 * w + 1;
    return std::vector<OpSample>{
        {{sample({3 * w + 1, c}), sample({3 * w + 1}, kInt64, 0, c - 1)}, {int64_t{-100}}},
        {{sample({w + 1, 5, 2}), sample({w + 1, 2}, kInt64, 0, 4)}, {int64_t{-100}}},
        {{sample({c}), sample({}, kInt64, 0, c - 1)}, {int64_t{-100}}},
        {{sample({detail::short_size(w), c}), sample({detail::short_size(w)}, kInt64, 0, c - 1)},
         {int64_t{-100}}}};
  };
  registry.add(std::move(op));
  register_gather_target_backward(registry);
  detail::register_pointwise_loss_ops(registry);
  detail::register_nll_loss_ops(registry);
}

}  // namespace dtensor
