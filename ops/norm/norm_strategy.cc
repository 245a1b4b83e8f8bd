// Registration of layer_norm and rms_norm: the normalised (trailing) dims must be
// replicated, the leading batch/sequence dims may be sharded (SequenceParallel's S(1)
// activations), weight and bias are replicated. Not linear: Partial inputs are reduced first.
// Inputs: self, then weight and bias when given; args: eps (runtime), normalized_shape,
// has_weight, has_bias (static).
#include "autograd/function.h"
#include "dtensor/propagation/dispatch.h"
#include "ops/common/grad_util.h"
#include "ops/elementwise/elementwise.h"
#include "ops/reduction/reduction.h"
#include "dtensor/propagation/registry.h"
#include "ops/common/strategy_util.h"
#include "ops/norm/norm.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

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

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

// The normalised (trailing) dims of a norm's input: the last `k` of `ndim`.
Shape norm_dims(int64_t ndim, int64_t k) {
  Shape dims;
  for (int64_t d = ndim - k; d < ndim; ++d) dims.push_back(d);
  return dims;
}

// Gradients of weight and bias (elementwise over the normalised dims): summed over the leading
// dims, which leaves them Partial(sum) where the input is sharded (sequence parallel).
// dx = rstd (gw - mean(gw) - xhat mean(gw xhat)) for layer norm, where gw = g * weight;
// rms norm drops the mean(gw) term.
DTensorList norm_backward(const BackwardContext& c, Grads g, bool layer) {
  const DTensor& x = c.input(0);
  const Shape& ns = c.arg<Shape>(1);
  const bool has_w = c.arg<bool>(2);
  const bool has_b = layer && c.arg<bool>(3);
  const Shape dims = norm_dims(x.dim(), static_cast<int64_t>(ns.size()));
  const DTensor xf = cast(x, is_floating(x.dtype()) && dtype_size(x.dtype()) < 4 ? kFloat32
                                                                                 : x.dtype());
  double eps;
  if (layer) {
    eps = c.scalar(0).to_double();
  } else if (c.has_arg(0)) {
    eps = c.arg<double>(0);
  } else {  // eps = None: the compute type's machine epsilon (norm.h)
    eps = xf.dtype() == kFloat64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
  }
  DTensor xhat, rstd;
  if (layer) {
    const DTensor centred = xf - mean(xf, dims, /*keepdim=*/true);
    rstd = rsqrt(mean(centred * centred, dims, /*keepdim=*/true) + eps);
    xhat = centred * rstd;
  } else {
    rstd = rsqrt(mean(xf * xf, dims, /*keepdim=*/true) + eps);
    xhat = xf * rstd;
  }
  const DTensor gf = cast(g[0], xf.dtype());
  const DTensor gw = has_w ? gf * cast(c.input(1), xf.dtype()) : gf;
  DTensor inner = gw - xhat * mean(gw * xhat, dims, /*keepdim=*/true);
  if (layer) inner = inner - mean(gw, dims, /*keepdim=*/true);
  DTensorList out(c.num_inputs());
  if (c.needs_input_grad(0)) out[0] = cast(inner * rstd, x.dtype());
  if (has_w && c.needs_input_grad(1)) out[1] = detail::reduce_to(gf * xhat, c.input_spec(1));
  if (has_b && c.needs_input_grad(has_w ? 2 : 1)) {
    out[has_w ? 2 : 1] = detail::reduce_to(gf, c.input_spec(has_w ? 2 : 1));
  }
  return out;
}

StrategyRows norm_rows(const OpSchema& s) {
  const int64_t batch_dims = s.input(0).ndim() - static_cast<int64_t>(s.arg<Shape>(1).size());
  StrategyRows rows;
  for (int64_t d = 0; d < batch_dims; ++d) {
    Placements row(1 + s.num_inputs(), Replicate());
    row[0] = Shard(d);
    row[1] = Shard(d);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

void register_norm_ops(Registry& registry) {
  OpInfo ln;
  ln.name = "layer_norm";
  ln.input_names = {"input", "weight", "bias"};
  ln.schema_info.static_argnum = 1;
  ln.meta = [](const OpSchema& s) { return norm_meta(s, "layer_norm"); };
  ln.strategy = norm_rows;
  ln.backward = [](const BackwardContext& c, Grads g) { return norm_backward(c, g, true); };
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
        {{sample({w + 1, 3, 4}), sample({3, 4})}, {1e-5, Shape{3, 4}, true, false}}};
  };
  registry.add(std::move(ln));

  OpInfo rms;
  rms.name = "rms_norm";
  rms.input_names = {"input", "weight"};
  rms.schema_info.static_argnum = 1;
  rms.meta = [](const OpSchema& s) { return norm_meta(s, "rms_norm"); };
  rms.strategy = norm_rows;
  rms.backward = [](const BackwardContext& c, Grads g) { return norm_backward(c, g, false); };
  rms.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    const std::optional<double> eps =
        c.has_arg(0) ? std::optional<double>(c.arg<double>(0)) : std::nullopt;
    return rms_norm(l[0], c.arg<Shape>(1), c.arg<bool>(2) ? l[1] : Tensor(), eps);
  });
  rms.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({3 * w + 1, 2, 4}), sample({4})}, {1e-6, Shape{4}, true}},
                                 {{sample({3 * w + 1, 4})}, {std::monostate(), Shape{4}, false}}};
  };
  registry.add(std::move(rms));
}

}  // namespace dtensor
