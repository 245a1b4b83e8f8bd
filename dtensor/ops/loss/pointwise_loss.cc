// The pointwise losses: argument checks shared by the Tensor functions and the DTensor ops'
// meta functions, the local building blocks (per-element terms, weights, reduction) and the
// public Tensor functions (the DTensor ones are in pointwise_loss_dtensor.cc).
#include "dtensor/ops/loss/detail/pointwise_loss.h"

#include <string>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/detail/loss_cpu.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace detail {

const char* loss_name(LossKind kind) {
  switch (kind) {
    case LossKind::kMse:
      return "mse_loss";
    case LossKind::kL1:
      return "l1_loss";
    case LossKind::kSmoothL1:
      return "smooth_l1_loss";
    case LossKind::kHuber:
      return "huber_loss";
    case LossKind::kBce:
      return "binary_cross_entropy";
    case LossKind::kBceWithLogits:
      return "binary_cross_entropy_with_logits";
    case LossKind::kKlDiv:
    case LossKind::kKlDivLogTarget:
      return "kl_div";
  }
  return "loss";
}

Reduction parse_reduction(std::string_view r, LossKind kind) {
  return parse_reduction(r, std::string_view(loss_name(kind)));
}

void check_reduction(std::string_view op, Reduction reduction, bool batchmean) {
  DT_CHECK(batchmean || reduction != Reduction::kBatchMean,
           "[%s] reduction 'batchmean' is only supported by kl_div (expected 'none', 'mean' or "
           "'sum')",
           op);
}

double loss_divisor(Reduction reduction, const Shape& input_shape) {
  switch (reduction) {
    case Reduction::kMean:
      return static_cast<double>(shape_numel(input_shape));
    case Reduction::kBatchMean:
      return input_shape.empty() ? 1.0 : static_cast<double>(input_shape[0]);
    case Reduction::kNone:
    case Reduction::kSum:
      break;
  }
  return 1.0;
}

namespace {

// weight / pos_weight: the input's dtype, and a shape that broadcasts to the input's.
void check_weight(const char* op, const char* what, const TensorMeta& w, const TensorMeta& x) {
  DT_CHECK(w.dtype == x.dtype, "[%s] argument %s has dtype %s, expected %s (the input's)", op, what,
           dtype_name(w.dtype), dtype_name(x.dtype));
  bool fits = w.shape.size() <= x.shape.size();
  for (size_t k = 0; fits && k < w.shape.size(); ++k) {
    const int64_t n = w.shape[w.shape.size() - 1 - k];
    fits = n == 1 || n == x.shape[x.shape.size() - 1 - k];
  }
  DT_CHECK(fits, "[%s] argument %s of shape %s does not broadcast to the input's shape %s", op,
           what, shape_str(w.shape), shape_str(x.shape));
}

}  // namespace

void check_pointwise_loss(LossKind kind, double param, const TensorMeta& x, const TensorMeta& y,
                          const TensorMeta* weight, const TensorMeta* pos_weight,
                          Reduction reduction) {
  const char* op = loss_name(kind);
  DT_CHECK(is_floating(x.dtype), "[%s] argument input has dtype %s, expected a floating dtype", op,
           dtype_name(x.dtype));
  DT_CHECK(y.dtype == x.dtype, "[%s] argument target has dtype %s, expected %s (the input's)", op,
           dtype_name(y.dtype), dtype_name(x.dtype));
  DT_CHECK(y.shape == x.shape, "[%s] target of shape %s does not match input of shape %s", op,
           shape_str(y.shape), shape_str(x.shape));
  if (weight != nullptr) check_weight(op, "weight", *weight, x);
  if (pos_weight != nullptr) check_weight(op, "pos_weight", *pos_weight, x);
  check_reduction(op, reduction, kind == LossKind::kKlDiv || kind == LossKind::kKlDivLogTarget);
  DT_CHECK(kind != LossKind::kSmoothL1 || param >= 0, "[smooth_l1_loss] beta must be >= 0, got %g",
           param);
  DT_CHECK(kind != LossKind::kHuber || param > 0, "[huber_loss] delta must be > 0, got %g", param);
}

std::string bce_input_error(const Tensor& x, const Tensor& target) {
  // NaN fails both comparisons, as in PyTorch's check.
  const auto outside = [](const Tensor& t) {
    if (t.numel() == 0) return false;
    const Tensor out = logical_not(logical_and(ge(t, Scalar(0.0)), le(t, Scalar(1.0))));
    return any(out).to(Device(kCPU)).item<bool>();
  };
  if (outside(x)) return "[binary_cross_entropy] all elements of input should be between 0 and 1";
  if (outside(target)) {
    return "[binary_cross_entropy] all elements of target should be between 0 and 1";
  }
  return "";
}

namespace {

// Whether the one-pass CPU kernels (pointwise_loss_simd_cpu.cc) take kind on x and y.
bool fusable_cpu(LossKind kind, const Tensor& x, const Tensor& y) {
  return x.device().is_cpu() && y.device().is_cpu() && loss_sum_fusable(kind) &&
         y.dtype() == x.dtype() && y.shape() == x.shape() &&
         (x.dtype() == kFloat32 || x.dtype() == kFloat64);
}

}  // namespace

Tensor pointwise_loss(LossKind kind, double param, const Tensor& x, const Tensor& y,
                      const Tensor& weight, const Tensor& pos_weight, Reduction reduction,
                      double divisor) {
  if (reduction != Reduction::kNone && !weight.defined() && !pos_weight.defined() &&
      fusable_cpu(kind, x, y)) {
    // The sum in one pass, without the term tensor (pointwise_loss_simd_cpu.cc).
    const Tensor total = full({}, Scalar(loss_sum_cpu(kind, param, x.contiguous(), y.contiguous())),
                              TensorOptions(x.dtype()));
    return reduction == Reduction::kSum ? total : div(total, Scalar(divisor));
  }
  Tensor losses = loss_terms({kind, LossPart::kValue, param}, x, y, pos_weight);
  if (weight.defined()) losses = mul(losses, weight);
  if (reduction == Reduction::kNone) return losses;
  const Tensor total = sum(losses);
  return reduction == Reduction::kSum ? total : div(total, Scalar(divisor));
}

Tensor pointwise_loss_grad(LossKind kind, LossPart part, double param, const Tensor& grad,
                           const Tensor& x, const Tensor& y, const Tensor& weight,
                           const Tensor& pos_weight, double scale) {
  if (part == LossPart::kGradInput && kind != LossKind::kKlDiv && grad.dim() == 0 &&
      grad.device().is_cpu() && !weight.defined() && !pos_weight.defined() &&
      fusable_cpu(kind, x, y)) {
    // A 0-d incoming gradient (after a mean / sum): the scaled gradient in one pass.
    const double k = grad.to(kFloat64).item<double>() * scale;
    return loss_grad_scaled_cpu(kind, param, k, x.contiguous(), y.contiguous());
  }
  Tensor out = loss_terms({kind, part, param}, x, y, pos_weight);
  // The terms are a fresh tensor: multiplied in place, and a mean's 1 / n folded into the
  // incoming gradient where that is smaller (0-d after a mean or sum), so the full-size data is
  // written once by the terms and once by the multiply, not three times into new allocations.
  Tensor g = grad;
  if (scale != 1.0 && g.numel() < out.numel()) {
    g = mul(g, Scalar(scale));
    scale = 1.0;
  }
  out = g.dtype() == out.dtype() && g.dim() <= out.dim() ? mul_(out, g) : mul(out, g);
  if (weight.defined() && part != LossPart::kValue) out = mul(out, weight);
  return scale == 1.0 ? out : mul_(out, Scalar(scale));
}

}  // namespace detail

namespace {

using detail::LossKind;

// A Tensor loss call: arguments checked, then the loss of the whole tensors.
Tensor tensor_loss(LossKind kind, double param, const Tensor& x, const Tensor& y,
                   const Tensor& weight, const Tensor& pos_weight, Reduction reduction) {
  const char* op = detail::loss_name(kind);
  DT_CHECK(x.defined(), "[%s] argument input is an undefined tensor", op);
  DT_CHECK(y.defined(), "[%s] argument target is an undefined tensor", op);
  const TensorMeta xm(x.shape(), x.dtype());
  const TensorMeta wm = weight.defined() ? TensorMeta(weight.shape(), weight.dtype()) : xm;
  const TensorMeta pm =
      pos_weight.defined() ? TensorMeta(pos_weight.shape(), pos_weight.dtype()) : xm;
  detail::check_pointwise_loss(kind, param, xm, TensorMeta(y.shape(), y.dtype()),
                               weight.defined() ? &wm : nullptr,
                               pos_weight.defined() ? &pm : nullptr, reduction);
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&y, "target"},
                                {&weight, "weight"},
                                {&pos_weight, "pos_weight"}}) {
    DT_CHECK(!t->defined() || t->device() == x.device(),
             "[%s] argument %s is on %s, expected the input's device %s", op, name,
             t->device().str(), x.device().str());
  }
  if (kind == LossKind::kBce) {
    const std::string error = detail::bce_input_error(x, y);
    DT_CHECK(error.empty(), "%s", error);
  }
  return detail::pointwise_loss(kind, param, x, y, weight, pos_weight, reduction,
                                detail::loss_divisor(reduction, x.shape()));
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return tensor_loss(LossKind::kMse, 0.0, input, target, Tensor(), Tensor(), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return tensor_loss(LossKind::kL1, 0.0, input, target, Tensor(), Tensor(), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  return tensor_loss(LossKind::kSmoothL1, beta, input, target, Tensor(), Tensor(), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  return tensor_loss(LossKind::kHuber, delta, input, target, Tensor(), Tensor(), reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction,
                            const Tensor& weight) {
  return tensor_loss(LossKind::kBce, 0.0, input, target, weight, Tensor(), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction, const Tensor& weight,
                                        const Tensor& pos_weight) {
  return tensor_loss(LossKind::kBceWithLogits, 0.0, input, target, weight, pos_weight, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  return tensor_loss(log_target ? LossKind::kKlDivLogTarget : LossKind::kKlDiv, 0.0, input, target,
                     Tensor(), Tensor(), reduction);
}

}  // namespace dtensor
