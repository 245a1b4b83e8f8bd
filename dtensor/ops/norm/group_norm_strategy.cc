// Registration of the fused group_norm op and its gradient op group_norm_backward (its backward
// formula in group_norm_backward.cc, its DTensor form in group_norm_dtensor.cc). Rows: the batch
// sharded (S(0) in, S(0) out, weight and bias Replicate; the gradient op's grad_weight and
// grad_bias Partial), or everything Replicate. Channel sharding stays with the composition in
// norm_layers_impl.h (detail/group_norm.h). Inputs: input, then weight and bias when given; args:
// eps (runtime), num_groups, has_weight, has_bias (static).
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/norm/detail/group_norm.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using detail::sample;
using detail::short_size;

// Checks input `x_input` and the [C] inputs after it; returns the [C] meta.
TensorMeta check_group_norm(const OpSchema& s, int64_t x_input, const char* op) {
  const DTensorSpec& x = s.input(x_input);
  const int64_t groups = s.arg<int64_t>(1);
  DT_CHECK(x.ndim() >= 2 && is_floating(x.dtype()),
           "[%s] input must be a floating tensor of at least 2 dims (N, C, ...), got %s of %s", op,
           shape_str(x.shape()), dtype_name(x.dtype()));
  const int64_t c = x.shape()[1];
  DT_CHECK(groups > 0 && c % groups == 0,
           "[%s] expected the number of channels %d to be divisible by num_groups %d", op, c,
           groups);
  const TensorMeta cm(Shape{c}, x.dtype());
  for (int64_t i = x_input + 1; i < s.num_inputs(); ++i) {
    DT_CHECK(s.input(i).shape() == cm.shape && s.input(i).dtype() == x.dtype(),
             "[%s] argument %s has shape %s and dtype %s, expected [%d] and %s", op,
             s.op().input_name(i), shape_str(s.input(i).shape()), dtype_name(s.input(i).dtype()), c,
             dtype_name(x.dtype()));
  }
  return cm;
}

// The batch-sharded row: outputs S(0) then `partials` Partial, inputs of x's shape S(0), the
// [C] ones Replicate.
StrategyRows batch_rows(const OpSchema& s, int64_t x_input, int64_t partials) {
  Placements row(1 + partials + s.num_inputs(), Replicate());
  row[0] = Shard(0);
  for (int64_t o = 1; o <= partials; ++o) row[o] = Partial();
  for (int64_t i = 0; i < s.num_inputs(); ++i) {
    if (s.input(i).shape() == s.input(x_input).shape()) row[1 + partials + i] = Shard(0);
  }
  return {row};
}

// Samples: channels split by whole groups or not, with and without weight and bias, an empty
// shard on the batch; `grad` prefixes grad_output.
std::vector<OpSample> group_norm_samples(int64_t w, bool grad) {
  std::vector<OpSample> out;
  const auto add = [&](Shape x, int64_t groups, bool has_w, bool has_b) {
    OpSample call;
    if (grad) call.inputs.push_back(sample(x));
    call.inputs.push_back(sample(x));
    if (has_w) call.inputs.push_back(sample({x[1]}));
    if (has_b && !grad) call.inputs.push_back(sample({x[1]}));
    call.args = {1e-5, groups, has_w, has_b};
    out.push_back(std::move(call));
  };
  add({3 * w + 1, 4, 3}, 2, true, true);
  add({2 * w + 1, 6, 2, 2}, 3, false, false);
  add({w + 1, 4, 5}, 4, true, false);
  add({short_size(w), 2, 3}, 1, true, true);
  return out;
}

}  // namespace

void register_group_norm_ops(Registry& registry) {
  OpInfo gn = detail::make_op("group_norm", {"input", "weight", "bias"});
  gn.schema_info.static_argnum = 1;
  gn.meta = [](const OpSchema& s) {
    check_group_norm(s, 0, "group_norm");
    return OutputMetas{s.input(0).meta()};
  };
  gn.strategy = [](const OpSchema& s) { return batch_rows(s, 0, 0); };
  gn.backward = detail::group_norm_grad;
  gn.saved_inputs = 3u;  // input, weight
  gn.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    const bool has_w = c.arg<bool>(2), has_b = c.arg<bool>(3);
    return detail::group_norm_fused(l[0], c.arg<int64_t>(1), has_w ? l[1] : Tensor(),
                                    has_b ? l[has_w ? 2 : 1] : Tensor(), c.scalar(0).to_double());
  });
  gn.samples = [](int64_t w) { return group_norm_samples(w, false); };
  registry.add(std::move(gn));

  // Every gradient is linear in grad_output: a Partial one passes through (grad_weight and
  // grad_bias come out Partial like it).
  OpInfo bw = detail::gradient_op("group_norm_backward", {"grad_output", "input", "weight"});
  bw.schema_info.static_argnum = 1;
  bw.meta = [](const OpSchema& s) {
    const TensorMeta cm = check_group_norm(s, 1, "group_norm_backward");
    DT_CHECK(s.input(0).shape() == s.input(1).shape() && s.input(0).dtype() == s.input(1).dtype(),
             "[group_norm_backward] grad_output (%s, %s) must match input (%s, %s)",
             shape_str(s.input(0).shape()), dtype_name(s.input(0).dtype()),
             shape_str(s.input(1).shape()), dtype_name(s.input(1).dtype()));
    OutputMetas out = {s.input(1).meta()};
    if (s.arg<bool>(2)) out.push_back(cm);
    if (s.arg<bool>(3)) out.push_back(cm);
    return out;
  };
  bw.strategy = [](const OpSchema& s) {
    return batch_rows(s, 1, int64_t{s.arg<bool>(2)} + int64_t{s.arg<bool>(3)});
  };
  bw.kernel = [](const KernelContext& c, absl::Span<const Tensor> l, absl::Span<Tensor> out) {
    const bool has_w = c.arg<bool>(2), has_b = c.arg<bool>(3);
    std::array<Tensor, 3> g =
        detail::group_norm_backward_local(l[0], l[1], c.arg<int64_t>(1), has_w ? l[2] : Tensor(),
                                          c.scalar(0).to_double(), {has_w, has_b});
    out[0] = std::move(g[0]);
    if (has_w) out[1] = std::move(g[1]);
    if (has_b) out[has_w ? 2 : 1] = std::move(g[2]);
  };
  bw.samples = [](int64_t w) { return group_norm_samples(w, true); };
  registry.add(std::move(bw));
}

}  // namespace dtensor
