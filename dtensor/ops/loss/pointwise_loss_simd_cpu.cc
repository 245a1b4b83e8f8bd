// Vectorised (Google Highway) rows of binary_cross_entropy_with_logits without pos_weight, the
// value and the input gradient, for pointwise_loss_cpu.cc. The scalar rows there call libm's
// expf / log1pf once or twice per element and stay scalar (float32 [256, 4096], one thread:
// 11.7-12.0 ms forward against PyTorch's 1.6 ms, whose kernel is vectorised); here the
// exponential is simd_math-inl.h's e^-|x| (x <= 0: ExpNonPositiveWide) and log1p Highway's.
//   value  (1 - y) x - log_sigmoid(x), log_sigmoid(x) = min(x, 0) - log1p(e^-|x|)
//   dx     sigmoid(x) - y
// NaN in x gives NaN, as the scalar formula; +-inf as there (log_sigmoid(-inf) = -inf).
#include <cstdint>

#include "dtensor/ops/loss/detail/loss_cpu.h"
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

}  // namespace

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

void bce_with_logits_row_cpu(DType dtype, bool grad_input, void* out, const void* x, const void* y,
                             int64_t n) {
  HWY_DYNAMIC_DISPATCH(BceLogitsRow)(dtype, grad_input, out, x, y, n);
}
}  // namespace dtensor::detail
#endif  // HWY_ONCE
