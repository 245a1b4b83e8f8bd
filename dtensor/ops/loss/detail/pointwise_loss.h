// Internal to the loss family: the per-element formulas of the pointwise losses (mse_loss,
// l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy, binary_cross_entropy_with_logits,
// kl_div), shared by the CPU and CUDA kernels so both give the same values, and the local
// building blocks the Tensor functions and the registered DTensor ops are made of.
//
// Every formula follows PyTorch 2.15 (its CPU kernels and derivatives.yaml). LossTerm computes
// in double and rounds once to the input dtype (the CUDA kernels, and the CPU's combinations no
// caller uses); the CPU rows compute the same formulas in the dtype's compute type, float for
// float32 and 16-bit inputs, double for float64, as PyTorch's CPU kernels
// (pointwise_loss_cpu.cc; bce_with_logits vectorised in pointwise_loss_simd_cpu.cc):
//   mse            (x - y)^2                                 dx 2 (x - y)
//   l1             |x - y|                                   dx sign(x - y)  (0 at 0 and NaN)
//   smooth_l1(b)   |d| < b ? d^2 / (2 b) : |d| - b / 2       dx clamp(d / b, -1, 1); b = 0: l1
//   huber(delta)   |d| < delta ? d^2 / 2 : delta (|d| - delta / 2)   dx clamp(d, -delta, delta)
//   bce            -(y max(log x, -100) + (1 - y) max(log(1 - x), -100))
//                  dx (x - y) / max(x (1 - x), 1e-12f)      dy -logit(x) = log(1 - x) - log x
//   bce_logits     (1 - y) x - lw log_sigmoid(x), lw = 1 + (pw - 1) y  (pw = 1 without pos_weight)
//                  dx lw sigmoid(x) - pw y                   dy -x - (pw - 1) log_sigmoid(x)
//                  dpw -y log_sigmoid(x)
//   kl_div         xlogy(y, y) - y x                         dx -y
//                  dy (y != 0 ? log y : 0) + y / y - x       (PyTorch's xlogy gradient: NaN at 0)
//   kl_div(log_target)  exp(y) (y - x)                       dx -exp(y)   dy exp(y) (y - x + 1)
// with d = x - y; the target gradients of mse, l1, smooth_l1 and huber are -dx. A `weight`
// multiplies the per-element loss after the formula (as PyTorch's weight.mul_ does).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "dtensor/core/dtensor_spec.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/tensor/macros.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

enum class LossKind : uint8_t {
  kMse,
  kL1,
  kSmoothL1,
  kHuber,
  kBce,
  kBceWithLogits,
  kKlDiv,
  kKlDivLogTarget,
};

// Which per-element quantity a kernel computes: the loss, its derivative with respect to the
// input, the target or pos_weight. (The derivative with respect to weight is the loss itself.)
enum class LossPart : uint8_t { kValue, kGradInput, kGradTarget, kGradPosWeight };

// The PyTorch name of the op ("mse_loss", "kl_div", ...).
const char* loss_name(LossKind kind);

// One element of a pointwise loss: operator()(x, y, pw) with pos_weight pw (1 when the loss
// has none). `param` is smooth_l1's beta or huber's delta.
struct LossTerm {
  LossKind kind;
  LossPart part;
  double param;

  DT_HOST_DEVICE static double sign(double d) { return static_cast<double>((d > 0) - (d < 0)); }
  // log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for every finite x.
  DT_HOST_DEVICE static double log_sigmoid(double x) {
    return (x < 0 ? x : 0.0) - ::log1p(::exp(-::fabs(x)));
  }

  DT_HOST_DEVICE double operator()(double x, double y, double pw = 1.0) const {
    switch (kind) {
      case LossKind::kMse:
      case LossKind::kL1:
      case LossKind::kSmoothL1:
      case LossKind::kHuber:
        return of_difference(x - y);
      case LossKind::kBce:
        return bce(x, y);
      case LossKind::kBceWithLogits:
        return bce_with_logits(x, y, pw);
      case LossKind::kKlDiv:
        return kl_div(x, y);
      case LossKind::kKlDivLogTarget:
        return kl_div_log_target(x, y);
    }
    return 0;
  }

  // max(v, -100) as std::max (NaN kept), PyTorch's clamp of bce's logarithms.
  DT_HOST_DEVICE static double clamp_log(double v) { return v < -100 ? -100.0 : v; }

  // mse, l1, smooth_l1 and huber: functions of d = x - y, whose target derivative is -dx.
  DT_HOST_DEVICE double of_difference(double d) const {
    const double ad = ::fabs(d);
    double value = 0, dx = 0;
    switch (kind) {
      case LossKind::kMse:
        value = d * d;
        dx = 2 * d;
        break;
      case LossKind::kL1:
        value = ad;
        dx = sign(d);
        break;
      case LossKind::kSmoothL1:
        value = ad < param ? 0.5 * d * d / param : ad - 0.5 * param;
        // beta == 0 is l1_loss (PyTorch calls it then): d / 0 would be NaN at d == 0.
        dx = param == 0 ? sign(d) : (d < -param ? -1.0 : (d > param ? 1.0 : d / param));
        break;
      default:  // kHuber
        value = ad < param ? 0.5 * d * d : param * (ad - 0.5 * param);
        dx = d < -param ? -param : (d > param ? param : d);
        break;
    }
    if (part == LossPart::kValue) return value;
    return part == LossPart::kGradTarget ? -dx : dx;
  }

  DT_HOST_DEVICE double bce(double x, double y) const {
    if (part == LossPart::kValue) {
      return (y - 1) * clamp_log(::log1p(-x)) - y * clamp_log(::log(x));
    }
    if (part == LossPart::kGradInput) {
      // PyTorch's floor is the float 1e-12 (9.99999996e-13 in double), measured.
      constexpr double kEps = static_cast<double>(1e-12f);
      const double den = (1 - x) * x;
      return (x - y) / (den > kEps ? den : kEps);
    }
    return ::log1p(-x) - ::log(x);  // kGradTarget: -logit(x), unclamped as in PyTorch
  }

  DT_HOST_DEVICE double bce_with_logits(double x, double y, double pw) const {
    const double ls = log_sigmoid(x);
    const double lw = 1 + (pw - 1) * y;
    switch (part) {
      case LossPart::kValue:
        return (1 - y) * x - lw * ls;
      case LossPart::kGradInput:
        return lw / (1 + ::exp(-x)) - pw * y;
      case LossPart::kGradTarget:
        return -x - (pw - 1) * ls;
      default:  // kGradPosWeight
        return -y * ls;
    }
  }

  // xlogy(y, y) - y x, with PyTorch's xlogy: 0 at y == 0, NaN for a NaN y.
  DT_HOST_DEVICE double kl_div(double x, double y) const {
    if (part == LossPart::kValue) return (y == 0 ? 0.0 : y * ::log(y)) - y * x;
    if (part == LossPart::kGradInput) return -y;
    return (y != 0 ? ::log(y) : 0.0) + y / y - x;  // kGradTarget
  }

  DT_HOST_DEVICE double kl_div_log_target(double x, double y) const {
    const double ey = ::exp(y);
    if (part == LossPart::kValue) return ey * (y - x);
    if (part == LossPart::kGradInput) return -ey;
    return ey * (y - x + 1);  // kGradTarget
  }
};

// The per-element `part` of the loss for x, y and pos_weight `pw` (undefined: none; it
// broadcasts to x's shape): a tensor of x's shape, dtype and device. No argument checks.
Tensor loss_terms(const LossTerm& term, const Tensor& x, const Tensor& y, const Tensor& pw);

// The loss of local tensors: the per-element values times `weight` (undefined: none;
// broadcast), then for kSum / kMean / kBatchMean their sum divided by `divisor` (1 for kSum).
// A shard's share of the global loss when `divisor` is the global one.
Tensor pointwise_loss(LossKind kind, double param, const Tensor& x, const Tensor& y,
                      const Tensor& weight, const Tensor& pos_weight, Reduction reduction,
                      double divisor);

// The gradient with respect to the input, the target (parts kGradInput, kGradTarget; shape of
// x), or the per-element gradients of weight (kValue) and pos_weight (kGradPosWeight), still of
// x's shape (the caller sums them over the broadcast dims): the per-element derivative times
// the upstream gradient `grad` (x's shape, or 0-d for a reduced loss), times `weight` (but for
// kValue), times `scale` (1 / the mean's divisor).
Tensor pointwise_loss_grad(LossKind kind, LossPart part, double param, const Tensor& grad,
                           const Tensor& x, const Tensor& y, const Tensor& weight,
                           const Tensor& pos_weight, double scale);

// The error message for a binary_cross_entropy input, else target, with an element outside
// [0, 1] (NaN included), as PyTorch raises it; empty when there is none. Reads the values back
// from a CUDA tensor (one small copy each).
std::string bce_input_error(const Tensor& x, const Tensor& target);

// Throws "[op] reduction 'batchmean' is only supported by kl_div ..." unless `batchmean`.
void check_reduction(std::string_view op, Reduction reduction, bool batchmean);

// What kMean / kBatchMean divide the sum by for an input of `input_shape`: its numel / its size
// along dim 0 (1 for a 0-d input); 1 for kNone and kSum.
double loss_divisor(Reduction reduction, const Shape& input_shape);

// The argument checks of a pointwise loss (the Tensor functions and the ops' meta functions):
// a floating input, a target of its shape and dtype, weights (when given) of its dtype that
// broadcast to its shape, the reduction, and beta >= 0 / delta > 0 (`param`).
void check_pointwise_loss(LossKind kind, double param, const TensorMeta& input,
                          const TensorMeta& target, const TensorMeta* weight,
                          const TensorMeta* pos_weight, Reduction reduction);

// One call's arguments, read from the args (parse_call) or built for dispatch (call_args in
// pointwise_loss_strategy.cc).
struct LossCall {
  LossKind kind;
  double param = 0;
  Reduction reduction = Reduction::kMean;
  bool has_weight = false;
  bool has_pos_weight = false;

  int64_t num_inputs() const { return 2 + int64_t{has_weight} + int64_t{has_pos_weight}; }
};

// The Reduction named `r` (an error naming the loss `kind`, or `op`, for an unknown name).
Reduction parse_reduction(std::string_view r, LossKind kind);
Reduction parse_reduction(std::string_view r, std::string_view op);

// The args of a call of the op registered as `base` (kKlDiv for both kl_div forms), starting at
// arg `first` (1 in the gradient ops, after wrt). Ctx: OpSchema, KernelContext or
// BackwardContext.
template <typename Ctx>
LossCall parse_call(LossKind base, const Ctx& c, int64_t first) {
  LossCall call{base};
  call.reduction = parse_reduction(c.template arg<std::string_view>(first), base);
  switch (base) {
    case LossKind::kSmoothL1:
    case LossKind::kHuber:
      call.param = c.template arg<double>(first + 1);
      break;
    case LossKind::kKlDiv:
      if (c.template arg<bool>(first + 1)) call.kind = LossKind::kKlDivLogTarget;
      break;
    case LossKind::kBce:
      call.has_weight = c.template arg<bool>(first + 1);
      break;
    case LossKind::kBceWithLogits:
      call.has_weight = c.template arg<bool>(first + 1);
      call.has_pos_weight = c.template arg<bool>(first + 2);
      break;
    default:
      break;
  }
  return call;
}

// The DTensor loss: dispatches the registered op of `kind` (weights undefined when absent).
DTensor dispatch_pointwise_loss(LossKind kind, double param, const DTensor& input,
                                const DTensor& target, const DTensor& weight,
                                const DTensor& pos_weight, Reduction reduction);

// Registers the pointwise losses and their gradient ops (pointwise_loss_strategy.cc); called by
// register_loss_ops.
void register_pointwise_loss_ops(Registry& registry);
// Registers nll_loss and nll_loss_backward (nll_loss_strategy.cc); called by register_loss_ops.
void register_nll_loss_ops(Registry& registry);

}  // namespace dtensor::detail
