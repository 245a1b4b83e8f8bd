// layer_norm / rms_norm on local tensors: the argument checks, the outputs and statistics
// allocated, and the switch to the CPU kernels (norm_cpu.cc) or the CUDA ones (norm_cuda.cu).
#include "dtensor/ops/norm/norm.h"

#include <array>
#include <limits>
#include <optional>
#include <string>

#include "dtensor/ops/norm/detail/norm_cpu.h"
#include "dtensor/ops/norm/detail/norm_cuda.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {
namespace {

using detail::norm_stats_dtype;

void check_same_meta(const Tensor& t, const Tensor& x, const char* what, const char* op) {
  DT_CHECK(t.dtype() == x.dtype() && t.device() == x.device(),
           "[%s] %s must have the input's dtype and device, got %s on %s (expected %s on %s)", op,
           what, dtype_name(t.dtype()), t.device().str(), dtype_name(x.dtype()), x.device().str());
}

// Checks the arguments and returns the size of one normalised slice.
int64_t check_norm_args(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                        const Tensor& bias, const char* op) {
  DT_CHECK(x.defined(), "[%s] expected a defined input tensor", op);
  const int64_t nd = x.dim(), nn = static_cast<int64_t>(normalized_shape.size());
  bool match = nn <= nd;
  for (int64_t i = 0; match && i < nn; ++i) {
    match = normalized_shape[i] == x.size(nd - nn + i);
  }
  DT_CHECK(match, "[%s] normalized_shape %s does not match the trailing dims of input %s", op,
           shape_str(normalized_shape), shape_str(x.sizes()));
  for (const auto* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    DT_CHECK(p->sizes() == Shape(normalized_shape.begin(), normalized_shape.end()),
             "[%s] %s of shape %s does not match normalized_shape %s", op, what,
             shape_str(p->sizes()), shape_str(normalized_shape));
    check_same_meta(*p, x, what, op);
  }
  // Raises "[op] expected a floating dtype" for the others.
  dispatch_floating(x.dtype(), op, []<typename T>() {});
  return shape_numel(normalized_shape);
}

// x's leading dims followed by ones for the normalised dims (aten::native_layer_norm's stats).
Shape stats_shape(const Tensor& x, IntSpan normalized_shape) {
  Shape s(x.sizes().begin(), x.sizes().end());
  for (size_t i = 0; i < normalized_shape.size(); ++i) s[s.size() - 1 - i] = 1;
  return s;
}

// The forward with optional statistics outputs (mean: layer norm only).
Tensor norm_forward(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                    const Tensor& bias, std::optional<double> eps, bool rms, const char* op,
                    Tensor* mean, Tensor* rstd) {
  const int64_t n = check_norm_args(x, normalized_shape, weight, bias, op);
  const TensorOptions stats_opts(norm_stats_dtype(x.dtype()), x.device());
  const Shape ss = stats_shape(x, normalized_shape);
  // Statistics of empty slices (normalized_shape holds a 0) are NaN, as a mean over nothing.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (mean != nullptr) *mean = n == 0 ? full(ss, nan, stats_opts) : empty(ss, stats_opts);
  if (rstd != nullptr) *rstd = n == 0 ? full(ss, nan, stats_opts) : empty(ss, stats_opts);
  if (x.device().is_cuda()) {
    return detail::norm_cuda(x, n, weight, bias, eps, rms, op, mean ? *mean : Tensor(),
                             rstd ? *rstd : Tensor());
  }
  return detail::norm_cpu(x, n, weight, bias, eps, rms, mean ? *mean : Tensor(),
                          rstd ? *rstd : Tensor());
}

// Checks a statistics tensor of the backward: the forward's shape and dtype.
void check_stats(const Tensor& s, const Tensor& x, IntSpan normalized_shape, const char* what,
                 const char* op) {
  DT_CHECK(s.defined(), "[%s] expected a defined %s tensor", op, what);
  const IntSpan lead = IntSpan(x.sizes()).subspan(0, x.sizes().size() - normalized_shape.size());
  const int64_t rows = shape_numel(lead);
  DT_CHECK(
      s.numel() == rows && s.dtype() == norm_stats_dtype(x.dtype()) && s.device() == x.device(),
      "[%s] %s must hold one %s value per normalised row (%d) on %s, got %s %s on %s", op, what,
      dtype_name(norm_stats_dtype(x.dtype())), rows, x.device().str(), dtype_name(s.dtype()),
      shape_str(s.sizes()), s.device().str());
}

// Shared backward: grads[0] = grad_x, [1] = grad_weight, [2] = grad_bias (layer norm only).
std::array<Tensor, 3> norm_backward(const Tensor& grad_out, const Tensor& x,
                                    IntSpan normalized_shape, const Tensor& mean,
                                    const Tensor& rstd, const Tensor& weight,
                                    std::array<bool, 3> mask, bool rms, const char* op) {
  const int64_t n = check_norm_args(x, normalized_shape, weight, Tensor(), op);
  DT_CHECK(grad_out.defined() && grad_out.sizes() == x.sizes(),
           "[%s] grad_out of shape %s does not match input of shape %s", op,
           grad_out.defined() ? shape_str(grad_out.sizes()) : std::string("(undefined)"),
           shape_str(x.sizes()));
  check_same_meta(grad_out, x, "grad_out", op);
  if (!rms) check_stats(mean, x, normalized_shape, "mean", op);
  check_stats(rstd, x, normalized_shape, "rstd", op);
  const Shape ns(normalized_shape.begin(), normalized_shape.end());
  const TensorOptions acc_opts(norm_stats_dtype(x.dtype()), x.device());
  Tensor gx = mask[0] ? empty(x.sizes(), TensorOptions(x.dtype(), x.device())) : Tensor();
  Tensor dw = mask[1] && weight.defined() ? zeros(ns, acc_opts) : Tensor();
  Tensor db = mask[2] && !rms ? zeros(ns, acc_opts) : Tensor();
  if (x.device().is_cuda()) {
    detail::norm_backward_cuda(grad_out, x, n, mean, rstd, weight, rms, gx, dw, db);
  } else if (x.numel() > 0) {
    detail::norm_backward_cpu(grad_out, x, n, mean, rstd, weight, rms, gx, dw, db);
  }
  // The accumulators hold the compute type; the gradients have the parameters' dtype.
  const auto finish = [&](const Tensor& t) { return t.defined() ? t.to(x.dtype()) : t; };
  return {gx, finish(dw), finish(db)};
}

}  // namespace

Tensor layer_norm(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  return norm_forward(x, normalized_shape, weight, bias, eps, false, "layer_norm", nullptr,
                      nullptr);
}

Tensor rms_norm(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  return norm_forward(x, normalized_shape, weight, Tensor(), eps, true, "rms_norm", nullptr,
                      nullptr);
}

LayerNormResult native_layer_norm(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                                  const Tensor& bias, double eps) {
  LayerNormResult r;
  r.output = norm_forward(x, normalized_shape, weight, bias, eps, false, "native_layer_norm",
                          &r.mean, &r.rstd);
  return r;
}

RmsNormResult native_rms_norm(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                              std::optional<double> eps) {
  RmsNormResult r;
  r.output = norm_forward(x, normalized_shape, weight, Tensor(), eps, true, "native_rms_norm",
                          nullptr, &r.rstd);
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& x,
                                   IntSpan normalized_shape, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, std::array<bool, 3> output_mask) {
  auto g = norm_backward(grad_out, x, normalized_shape, mean, rstd, weight, output_mask, false,
                         "layer_norm_backward");
  return {g[0], g[1], g[2]};
}

RmsNormGrads rms_norm_backward(const Tensor& grad_out, const Tensor& x, IntSpan normalized_shape,
                               const Tensor& rstd, const Tensor& weight,
                               std::array<bool, 2> output_mask) {
  auto g = norm_backward(grad_out, x, normalized_shape, Tensor(), rstd, weight,
                         {output_mask[0], output_mask[1], false}, true, "rms_norm_backward");
  return {g[0], g[1]};
}

}  // namespace dtensor
