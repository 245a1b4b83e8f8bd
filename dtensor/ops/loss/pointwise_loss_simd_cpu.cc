// Vectorised (Google Highway) rows of binary_cross_entropy_with_logits without pos_weight, the
// value and the input gradient, for pointwise_loss_cpu.cc. The scalar rows there call libm's
// expf / log1pf once or twice per element and stay scalar (float32 [256, 4096], one thread:
// 11.7-12.0 ms forward against PyTorch's 1.6 ms, whose kernel is vectorised); here the
// exponential is simd_math-inl.h's e^-|x| (x <= 0: ExpNonPositiveWide) and log1p Highway's.
//   value  (1 - y) x - log_sigmoid(x), log_sigmoid(x) = min(x, 0) - log1p(e^-|x|)
//   dx     sigmoid(x) - y
// NaN in x gives NaN, as the scalar formula; +-inf as there (log_sigmoid(-inf) = -inf).
// Also the sum of the per-element losses of mse, l1, smooth_l1, huber, bce_with_logits (no
// weight, no pos_weight) and kl_div (not log_target; its gradient -y keeps the unfused path) in
// one pass for a mean / sum reduction, as PyTorch fuses it: the term
// tensor is neither allocated, written nor read again. And their input gradient times a scalar
// incoming gradient (after a mean / sum) in one pass: the terms are not written, then read and
// multiplied in place (float32 [256, 4096] smooth_l1 forward + backward, one thread: 0.63-0.68
// ms, PyTorch's 0.41-0.45).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "dtensor/ops/common/detail/parallel_for.h"
#include "dtensor/ops/loss/detail/loss_cpu.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/dtype.h"

#define HWY_TARGET_INCLUDE "dtensor/ops/loss/pointwise_loss_simd_cpu.cc"
#include "dtensor/ops/common/detail/simd_kernel-inl.h"  // IWYU pragma: keep

HWY_BEFORE_NAMESPACE();
namespace dtensor::detail::HWY_NAMESPACE {
namespace {

template <class D, class V>
HWY_INLINE V LogSigmoidC(D d, V x) {
  const V e = ExpNonPositiveWide(d, hn::Neg(hn::Abs(x)));
  const V ls = hn::Sub(hn::Min(x, hn::Zero(d)), hn::Log1p(d, e));
  return hn::IfThenElse(hn::IsNaN(x), x, ls);
}

// The loss of kind k per lane (pointwise_loss.h's formulas, in the order of LossTerm's
// operations), b = beta / delta.
template <class D, class V>
HWY_INLINE V LossV(LossKind k, D d, V x, V y, V b) {
  const V half = hn::Set(d, hn::TFromD<D>(0.5));
  const V diff = hn::Sub(x, y), ad = hn::Abs(diff);
  switch (k) {
    case LossKind::kMse:
      return hn::Mul(diff, diff);
    case LossKind::kL1:
      return ad;
    case LossKind::kSmoothL1: {
      const V quad = hn::Div(hn::Mul(hn::Mul(half, diff), diff), b);
      return hn::IfThenElse(hn::Lt(ad, b), quad, hn::Sub(ad, hn::Mul(half, b)));
    }
    case LossKind::kHuber:
      return hn::IfThenElse(hn::Lt(ad, b), hn::Mul(hn::Mul(half, diff), diff),
                            hn::Mul(b, hn::Sub(ad, hn::Mul(half, b))));
    case LossKind::kKlDiv:  // xlogy(y, y) - y x, 0 log 0 = 0 (term_of's)
      return hn::Sub(hn::IfThenElseZero(hn::Ne(y, hn::Zero(d)), hn::Mul(y, LogC(d, y))),
                     hn::Mul(y, x));
    default: {  // kBceWithLogits
      const V one = hn::Set(d, hn::TFromD<D>(1));
      return hn::Sub(hn::Mul(hn::Sub(one, y), x), LogSigmoidC(d, x));
    }
  }
}

// The sum of n contiguous elements in the compute type with SumMap's vector accumulators.
template <LossKind K>
double LossSumOf(DType dt, double param, const void* x, const void* y, int64_t n) {
  double total = 0;
  dispatch_floating(dt, loss_name(K), [&]<typename T>() {
    using C = simd_compute_t<T>;
    const C b = static_cast<C>(param);
    total = SumMap<T>(
        n, [b](auto d, auto xv, auto yv) { return LossV(K, d, xv, yv, hn::Set(d, b)); },
        static_cast<const T*>(x), static_cast<const T*>(y));
  });
  return total;
}

// The input derivative of kind k per lane (no pos_weight: pointwise_loss_cpu.cc's term_of with
// P = kGradInput, the same selects: sign(NaN) = 0, a NaN difference stays NaN otherwise).
template <class D, class V>
HWY_INLINE V LossGradV(LossKind k, D d, V x, V y, V b) {
  const V one = hn::Set(d, hn::TFromD<D>(1)), zero = hn::Zero(d);
  const V diff = hn::Sub(x, y);
  const auto sign = [&] {
    return hn::IfThenElse(hn::Lt(diff, zero), hn::Neg(one),
                          hn::IfThenElseZero(hn::Gt(diff, zero), one));
  };
  switch (k) {
    case LossKind::kMse:
      return hn::Add(diff, diff);
    case LossKind::kL1:
      return sign();
    case LossKind::kSmoothL1: {
      const V q = hn::IfThenElse(hn::Lt(diff, hn::Neg(b)), hn::Neg(one),
                                 hn::IfThenElse(hn::Gt(diff, b), one, hn::Div(diff, b)));
      return hn::IfThenElse(hn::Eq(b, zero), sign(), q);
    }
    case LossKind::kHuber:
      return hn::IfThenElse(hn::Lt(diff, hn::Neg(b)), hn::Neg(b),
                            hn::IfThenElse(hn::Gt(diff, b), b, diff));
    default:  // kBceWithLogits
      return hn::Sub(SigmoidC(d, x), y);
  }
}

template <LossKind K>
void LossGradOf(DType dt, double param, double scale, void* out, const void* x, const void* y,
                int64_t n) {
  dispatch_floating(dt, loss_name(K), [&]<typename T>() {
    using C = simd_compute_t<T>;
    const C b = static_cast<C>(param), k = static_cast<C>(scale);
    MapRow<T>(
        static_cast<T*>(out), n,
        [b, k](auto d, auto xv, auto yv) {
          return hn::Mul(LossGradV(K, d, xv, yv, hn::Set(d, b)), hn::Set(d, k));
        },
        static_cast<const T*>(x), static_cast<const T*>(y));
  });
}

}  // namespace

void LossGradScaled(DType dt, LossKind kind, double param, double scale, void* out, const void* x,
                    const void* y, int64_t n) {
  switch (kind) {
    case LossKind::kMse:
      return LossGradOf<LossKind::kMse>(dt, param, scale, out, x, y, n);
    case LossKind::kL1:
      return LossGradOf<LossKind::kL1>(dt, param, scale, out, x, y, n);
    case LossKind::kSmoothL1:
      return LossGradOf<LossKind::kSmoothL1>(dt, param, scale, out, x, y, n);
    case LossKind::kHuber:
      return LossGradOf<LossKind::kHuber>(dt, param, scale, out, x, y, n);
    default:
      return LossGradOf<LossKind::kBceWithLogits>(dt, param, scale, out, x, y, n);
  }
}

double LossSum(DType dt, LossKind kind, double param, const void* x, const void* y, int64_t n) {
  switch (kind) {
    case LossKind::kMse:
      return LossSumOf<LossKind::kMse>(dt, param, x, y, n);
    case LossKind::kL1:
      return LossSumOf<LossKind::kL1>(dt, param, x, y, n);
    case LossKind::kSmoothL1:
      return LossSumOf<LossKind::kSmoothL1>(dt, param, x, y, n);
    case LossKind::kHuber:
      return LossSumOf<LossKind::kHuber>(dt, param, x, y, n);
    case LossKind::kKlDiv:
      return LossSumOf<LossKind::kKlDiv>(dt, param, x, y, n);
    default:
      return LossSumOf<LossKind::kBceWithLogits>(dt, param, x, y, n);
  }
}

void BceLogitsRow(DType dt, bool grad, void* out, const void* x, const void* y, int64_t n) {
  dispatch_floating(dt, "binary_cross_entropy_with_logits", [&]<typename T>() {
    T* o = static_cast<T*>(out);
    const T* xp = static_cast<const T*>(x);
    const T* yp = static_cast<const T*>(y);
    if (grad) {
      MapRow<T>(
          o, n, [](auto d, auto xv, auto yv) { return hn::Sub(SigmoidC(d, xv), yv); }, xp, yp);
    } else {
      MapRow<T>(
          o, n,
          [](auto d, auto xv, auto yv) {
            const auto one = hn::Set(d, hn::TFromD<decltype(d)>(1));
            return hn::Sub(hn::Mul(hn::Sub(one, yv), xv), LogSigmoidC(d, xv));
          },
          xp, yp);
    }
  });
}

}  // namespace dtensor::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dtensor::detail {
HWY_EXPORT(BceLogitsRow);
HWY_EXPORT(LossSum);
HWY_EXPORT(LossGradScaled);

bool loss_sum_fusable(LossKind kind) {
  return kind == LossKind::kMse || kind == LossKind::kL1 || kind == LossKind::kSmoothL1 ||
         kind == LossKind::kHuber || kind == LossKind::kBceWithLogits || kind == LossKind::kKlDiv;
}

double loss_sum_cpu(LossKind kind, double param, const Tensor& x, const Tensor& y) {
  // Blocks of a fixed size summed in the compute type, then added in order in double: the same
  // result whatever the thread count.
  constexpr int64_t kBlock = 4096;
  const int64_t n = x.numel(), blocks = (n + kBlock - 1) / kBlock;
  const auto es = static_cast<int64_t>(dtype_size(x.dtype()));
  const char* xp = static_cast<const char*>(x.data_ptr());
  const char* yp = static_cast<const char*>(y.data_ptr());
  std::vector<double> part(static_cast<size_t>(blocks));
  parallel_for(0, blocks, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t at = k * kBlock, len = std::min(kBlock, n - at);
      part[static_cast<size_t>(k)] =
          HWY_DYNAMIC_DISPATCH(LossSum)(x.dtype(), kind, param, xp + at * es, yp + at * es, len);
    }
  });
  double total = 0;
  for (double v : part) total += v;
  return total;
}

Tensor loss_grad_scaled_cpu(LossKind kind, double param, double scale, const Tensor& x,
                            const Tensor& y) {
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype()));
  constexpr int64_t kBlock = 4096;
  const int64_t n = x.numel(), blocks = (n + kBlock - 1) / kBlock;
  const auto es = static_cast<int64_t>(dtype_size(x.dtype()));
  const char* xp = static_cast<const char*>(x.data_ptr());
  const char* yp = static_cast<const char*>(y.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  parallel_for(0, blocks, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t at = k * kBlock, len = std::min(kBlock, n - at);
      HWY_DYNAMIC_DISPATCH(LossGradScaled)
      (x.dtype(), kind, param, scale, op + at * es, xp + at * es, yp + at * es, len);
    }
  });
  return out;
}

void bce_with_logits_row_cpu(DType dtype, bool grad_input, void* out, const void* x, const void* y,
                             int64_t n) {
  HWY_DYNAMIC_DISPATCH(BceLogitsRow)(dtype, grad_input, out, x, y, n);
}
}  // namespace dtensor::detail
#endif  // HWY_ONCE
