// Registration of layer_norm and rms_norm: the normalised (trailing) dims must be
// replicated, the leading batch/sequence dims may be sharded (SequenceParallel's S(1)
// activations), weight and bias are replicated. Not linear: Partial inputs are reduced first.
// Inputs: self, then weight and bias when given; args: eps (runtime), normalized_shape,
// has_weight, has_bias (static).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/norm/detail/norm_backward.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using detail::layer_norm_grad;
using detail::rms_norm_grad;

OutputMetas norm_meta(const OpSchema& s, std::string_view name) {
  const DTensorSpec& x = s.input(0);
  const Shape& ns = s.arg<Shape>(1);
  const int64_t k = static_cast<int64_t>(ns.size());
  DT_CHECK(is_floating(x.dtype()), "[%s] argument input has dtype %s, expected a floating dtype",
           name, dtype_name(x.dtype()));
  bool trailing = k >= 1 && k <= x.ndim();
  for (int64_t i = 0; trailing && i < k; ++i) trailing = x.shape()[x.ndim() - k + i] == ns[i];
  DT_CHECK(trailing, "[%s] normalized_shape %s does not match the trailing dims of input shape %s",
           name, shape_str(ns), shape_str(x.shape()));
  for (int64_t i = 1; i < s.num_inputs(); ++i) {
    DT_CHECK(s.input(i).shape() == ns && s.input(i).dtype() == x.dtype(),
             "[%s] argument %s has shape %s and dtype %s, expected shape %s and dtype %s", name,
             s.op().input_name(i), shape_str(s.input(i).shape()), dtype_name(s.input(i).dtype()),
             shape_str(ns), dtype_name(x.dtype()));
  }
  return {x.meta()};
}

// One row per leading (batch) dim d of the input `x_input`: the output and every input of x's
// shape S(d), weight and bias R. Forward: [S(d) | S(d), R, R]. Backward ops: grad_input S(d),
// grad_weight and grad_bias Partial (each rank sums its own rows) | grad_output and input S(d),
// weight R.
StrategyRows norm_rows(const OpSchema& s, int64_t x_input, int64_t num_outputs) {
  const DTensorSpec& x = s.input(x_input);
  const int64_t batch_dims = x.ndim() - static_cast<int64_t>(s.arg<Shape>(1).size());
  StrategyRows rows;
  for (int64_t d = 0; d < batch_dims; ++d) {
    Placements row(num_outputs + s.num_inputs(), Replicate());
    row[0] = Shard(d);
    for (int64_t o = 1; o < num_outputs; ++o) row[o] = Partial();
    for (int64_t i = 0; i < s.num_inputs(); ++i) {
      if (s.input(i).shape() == x.shape()) row[num_outputs + i] = Shard(d);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// The backward ops' metas: grad_input like input, grad_weight/grad_bias like weight.
OutputMetas norm_grad_meta(const OpSchema& s, const char* name, bool layer) {
  DT_CHECK(s.input(0).shape() == s.input(1).shape() && s.input(0).dtype() == s.input(1).dtype(),
           "[%s] grad_output (%s, %s) must match input (%s, %s)", name,
           shape_str(s.input(0).shape()), dtype_name(s.input(0).dtype()),
           shape_str(s.input(1).shape()), dtype_name(s.input(1).dtype()));
  OutputMetas out = {s.input(1).meta()};
  const TensorMeta w(s.arg<Shape>(1), s.input(1).dtype());
  if (s.arg<bool>(2)) out.push_back(w);
  if (layer && s.arg<bool>(3)) out.push_back(w);
  return out;
}

// A norm gradient op's schema, meta and strategy (its kernel and samples are the caller's):
// inputs (grad_output, input[, weight]), the forward's args, not differentiated again.
OpInfo norm_grad_op(const char* name, bool layer) {
  OpInfo op = detail::make_op(name, {"grad_output", "input", "weight"});
  // Every gradient (input, weight, bias) is linear in grad_output: a Partial one passes
  // through unreduced (the weight and bias gradients come out Partial like it).
  op.linearity = Linearity::kLinearInFirst;
  op.schema_info.static_argnum = 1;
  op.differentiable = false;
  op.meta = [name, layer](const OpSchema& s) { return norm_grad_meta(s, name, layer); };
  op.strategy = [layer](const OpSchema& s) {
    return norm_rows(s, 1, 1 + int64_t{s.arg<bool>(2)} + int64_t{layer && s.arg<bool>(3)});
  };
  return op;
}

}  // namespace

void register_norm_ops(Registry& registry) {
  OpInfo ln = detail::make_op("layer_norm", {"input", "weight", "bias"});
  ln.schema_info.static_argnum = 1;
  ln.meta = [](const OpSchema& s) { return norm_meta(s, "layer_norm"); };
  ln.strategy = [](const OpSchema& s) { return norm_rows(s, 0, 1); };
  ln.backward = layer_norm_grad;
  ln.saved_inputs = 3u;  // input, weight
  ln.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    const bool has_w = c.arg<bool>(2), has_b = c.arg<bool>(3);
    return layer_norm(l[0], c.arg<Shape>(1), has_w ? l[1] : Tensor(),
                      has_b ? l[has_w ? 2 : 1] : Tensor(), c.scalar(0).to_double());
  });
  ln.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{
        {{sample({3 * w + 1, 2, 4}), sample({4}), sample({4})}, {1e-5, Shape{4}, true, true}},
        {{sample({3 * w + 1, 4})}, {1e-5, Shape{4}, false, false}},
        {{sample({w + 1, 3, 4}), sample({3, 4})}, {1e-5, Shape{3, 4}, true, false}},
        {{sample({detail::short_size(w), 4}), sample({4}), sample({4})},
         {1e-5, Shape{4}, true, true}}};
  };
  registry.add(std::move(ln));

  OpInfo rms = detail::make_op("rms_norm", {"input", "weight"});
  rms.schema_info.static_argnum = 1;
  rms.meta = [](const OpSchema& s) { return norm_meta(s, "rms_norm"); };
  rms.strategy = [](const OpSchema& s) { return norm_rows(s, 0, 1); };
  rms.backward = rms_norm_grad;
  rms.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    const std::optional<double> eps =
        c.has_arg(0) ? std::optional<double>(c.arg<double>(0)) : std::nullopt;
    return rms_norm(l[0], c.arg<Shape>(1), c.arg<bool>(2) ? l[1] : Tensor(), eps);
  });
  rms.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{
        {{sample({3 * w + 1, 2, 4}), sample({4})}, {1e-6, Shape{4}, true}},
        {{sample({3 * w + 1, 4})}, {std::monostate(), Shape{4}, false}},
        {{sample({detail::short_size(w), 4}), sample({4})}, {1e-6, Shape{4}, true}}};
  };
  registry.add(std::move(rms));

  // The gradient ops the backward formulas call (not differentiated again).
  OpInfo ln_bw = norm_grad_op("layer_norm_backward", true);
  ln_bw.kernel = [](const KernelContext& c, absl::Span<const Tensor> l, absl::Span<Tensor> out) {
    const Shape& ns = c.arg<Shape>(1);
    const bool has_w = c.arg<bool>(2), has_b = c.arg<bool>(3);
    const Tensor w = has_w ? l[2] : Tensor();
    const LayerNormResult st = native_layer_norm(l[1], ns, w, Tensor(), c.scalar(0).to_double());
    LayerNormGrads gr =
        layer_norm_backward(l[0], l[1], ns, st.mean, st.rstd, w, {true, has_w, has_b});
    out[0] = std::move(gr.grad_x);
    if (has_w) out[1] = std::move(gr.grad_weight);
    if (has_b) out[has_w ? 2 : 1] = std::move(gr.grad_bias);
  };
  ln_bw.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{
        {{sample({3 * w + 1, 2, 4}), sample({3 * w + 1, 2, 4}), sample({4})},
         {1e-5, Shape{4}, true, true}},
        {{sample({3 * w + 1, 4}), sample({3 * w + 1, 4})}, {1e-5, Shape{4}, false, false}},
        {{sample({w + 1, 3, 4}), sample({w + 1, 3, 4}), sample({3, 4})},
         {1e-5, Shape{3, 4}, true, false}},
        {{sample({detail::short_size(w), 4}), sample({detail::short_size(w), 4}), sample({4})},
         {1e-5, Shape{4}, true, true}}};
  };
  registry.add(std::move(ln_bw));

  OpInfo rms_bw = norm_grad_op("rms_norm_backward", false);
  rms_bw.kernel = [](const KernelContext& c, absl::Span<const Tensor> l, absl::Span<Tensor> out) {
    const Shape& ns = c.arg<Shape>(1);
    const bool has_w = c.arg<bool>(2);
    const Tensor w = has_w ? l[2] : Tensor();
    const std::optional<double> eps =
        c.has_arg(0) ? std::optional<double>(c.arg<double>(0)) : std::nullopt;
    const RmsNormResult st = native_rms_norm(l[1], ns, w, eps);
    RmsNormGrads gr = rms_norm_backward(l[0], l[1], ns, st.rstd, w, {true, has_w});
    out[0] = std::move(gr.grad_x);
    if (has_w) out[1] = std::move(gr.grad_weight);
  };
  rms_bw.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{
        {{sample({3 * w + 1, 2, 4}), sample({3 * w + 1, 2, 4}), sample({4})},
         {1e-6, Shape{4}, true}},
        {{sample({3 * w + 1, 4}), sample({3 * w + 1, 4})}, {std::monostate(), Shape{4}, false}},
        {{sample({detail::short_size(w), 4}), sample({detail::short_size(w), 4}), sample({4})},
         {1e-6, Shape{4}, true}}};
  };
  registry.add(std::move(rms_bw));
}

}  // namespace dtensor
