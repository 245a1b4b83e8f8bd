// The per-element terms of the pointwise losses on the CPU, over an ElementwiseIter (so
// pos_weight broadcasts and the loop runs on the intra-op threads), and the device dispatch to
// the CUDA kernels.
//
// The loss kind and part are chosen once, outside the element loop: one loop is instantiated per
// (kind, part, dtype), each a straight-line formula the compiler vectorises where it can (mse,
// l1, smooth_l1, huber). The formulas are pointwise_loss.h's LossTerm's, computed in the
// dtype's compute type (float for float32, Half and BFloat16, as PyTorch's CPU kernels do;
// double for float64) rather than always in double. float32 [256, 4096], one thread, forward
// (LossTerm's switch in double per element -> these loops; PyTorch 0.15 / 0.27 / 0.16 / 1.55):
// mse 1.05 -> 0.17 ms, l1 1.07 -> 0.17, smooth_l1 5.8 -> 0.27, bce_with_logits 15.7 -> 11.7
// (libm's expf / log1pf per element, not vectorised) -> 0.62 with its rows in Highway
// (pointwise_loss_simd_cpu.cc; no pos_weight, contiguous rows). A mean / sum of mse, l1,
// smooth_l1, huber or bce_with_logits (no weights), and its input gradient, skip these terms:
// one pass each there (pointwise_loss.cc decides).
#include <cmath>
#include <type_traits>

#include "dtensor/ops/common/detail/cpu_loops.h"
#include "dtensor/ops/loss/detail/loss_cpu.h"
#include "dtensor/ops/loss/detail/loss_cuda.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::detail {

namespace {

// |v|, exp, log and log1p as builtins of float or double: the std:: wrappers were not inlined
// into the rows built with another optimize attribute (DT_LOSS_ROW_ATTRS), and their calls kept
// the loops scalar.
#define DT_LOSS_MATH(name, fn)                                           \
  template <typename C>                                                  \
  DT_FORCE_INLINE C name(C v) {                                          \
    if constexpr (std::is_same_v<C, float>) return __builtin_##fn##f(v); \
    return __builtin_##fn(v);                                            \
  }
DT_LOSS_MATH(abs_of, fabs)
DT_LOSS_MATH(exp_of, exp)
DT_LOSS_MATH(log_of, log)
DT_LOSS_MATH(log1p_of, log1p)
#undef DT_LOSS_MATH

template <typename C>
DT_FORCE_INLINE C sign_of(C d) {
  return static_cast<C>((d > 0) - (d < 0));
}

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), as LossTerm::log_sigmoid.
template <typename C>
DT_FORCE_INLINE C log_sigmoid_of(C x) {
  return (x < 0 ? x : C(0)) - log1p_of(exp_of(-abs_of(x)));
}

// max(v, -100) with NaN kept, as LossTerm::clamp_log.
template <typename C>
DT_FORCE_INLINE C clamp_log_of(C v) {
  return v < C(-100) ? C(-100) : v;
}

// LossTerm's formula of kind K and part P in compute type C; b is beta / delta.
template <LossKind K, LossPart P, typename C>
DT_FORCE_INLINE C term_of(C x, C y, C pw, C b) {
  if constexpr (K == LossKind::kMse || K == LossKind::kL1 || K == LossKind::kSmoothL1 ||
                K == LossKind::kHuber) {
    const C d = x - y;
    if constexpr (P == LossPart::kValue) {
      const C ad = abs_of(d);
      if constexpr (K == LossKind::kMse) {
        return d * d;
      } else if constexpr (K == LossKind::kL1) {
        return ad;
      } else if constexpr (K == LossKind::kSmoothL1) {
        // One unconditional division (lin / 1 is exact): GCC neither if-converts nor
        // vectorises a division on one side of a select (it could trap).
        const bool quad = ad < b;
        const C num = quad ? C(0.5) * d * d : ad - C(0.5) * b;
        return num / (quad ? b : C(1));
      } else {
        return ad < b ? C(0.5) * d * d : b * (ad - C(0.5) * b);
      }
    } else {
      C dx;
      if constexpr (K == LossKind::kMse) {
        dx = C(2) * d;
      } else if constexpr (K == LossKind::kL1) {
        dx = sign_of(d);
      } else if constexpr (K == LossKind::kSmoothL1) {
        const bool out_of_band = d < -b || d > b || b == C(0);
        const C q = (d < -b ? C(-1) : (d > b ? C(1) : d)) / (out_of_band ? C(1) : b);
        dx = b == C(0) ? sign_of(d) : q;
      } else {
        dx = d < -b ? -b : (d > b ? b : d);
      }
      return P == LossPart::kGradTarget ? -dx : dx;
    }
  } else if constexpr (K == LossKind::kBce) {
    if constexpr (P == LossPart::kValue) {
      return (y - C(1)) * clamp_log_of(C(log1p_of(-x))) - y * clamp_log_of(C(log_of(x)));
    } else if constexpr (P == LossPart::kGradInput) {
      const C eps = static_cast<C>(1e-12f);  // PyTorch's float floor, as LossTerm
      const C den = (C(1) - x) * x;
      return (x - y) / (den > eps ? den : eps);
    } else {
      return log1p_of(-x) - log_of(x);
    }
  } else if constexpr (K == LossKind::kBceWithLogits) {
    const C ls = log_sigmoid_of(x);
    const C lw = C(1) + (pw - C(1)) * y;
    if constexpr (P == LossPart::kValue) {
      return (C(1) - y) * x - lw * ls;
    } else if constexpr (P == LossPart::kGradInput) {
      return lw / (C(1) + exp_of(-x)) - pw * y;
    } else if constexpr (P == LossPart::kGradTarget) {
      return -x - (pw - C(1)) * ls;
    } else {
      return -y * ls;
    }
  } else if constexpr (K == LossKind::kKlDiv) {
    if constexpr (P == LossPart::kValue) {
      return (y == C(0) ? C(0) : y * log_of(y)) - y * x;
    } else if constexpr (P == LossPart::kGradInput) {
      return -y;
    } else {
      return (y != C(0) ? C(log_of(y)) : C(0)) + y / y - x;
    }
  } else {  // kKlDivLogTarget
    const C ey = exp_of(y);
    if constexpr (P == LossPart::kValue) {
      return ey * (y - x);
    } else if constexpr (P == LossPart::kGradInput) {
      return -ey;
    } else {
      return ey * (y - x + C(1));
    }
  }
}

// GCC: -fno-trapping-math for the rows (FP exceptions are never enabled here, so results are
// unchanged), which lets it if-convert and vectorise the selects around smooth_l1's division.
#if defined(__GNUC__) && !defined(__clang__)
#define DT_LOSS_ROW_ATTRS __attribute__((noinline, optimize("no-trapping-math")))
#else
#define DT_LOSS_ROW_ATTRS __attribute__((noinline))
#endif

// One contiguous row. b arrives by value and out cannot alias the inputs (a fresh tensor), so
// the loop vectorises; read through cpu_kernel's closure, b was reloaded every element (the
// store to out might have changed it) and the loop stayed scalar.
template <typename T, LossKind K, LossPart P, bool kPw>
DT_LOSS_ROW_ATTRS void term_row(T* __restrict out, int64_t n, compute_t<T> b, const T* __restrict x,
                                const T* __restrict y, const T* __restrict pw) {
  using C = compute_t<T>;
  for (int64_t i = 0; i < n; ++i) {
    const C p = kPw ? static_cast<C>(pw[i]) : C(1);
    out[i] = convert<T>(term_of<K, P, C>(static_cast<C>(x[i]), static_cast<C>(y[i]), p, b));
  }
}

template <typename T, LossKind K, LossPart P>
void run_terms(double param, const Tensor& out, const Tensor& x, const Tensor& y,
               const Tensor& pw) {
  using C = compute_t<T>;
  const C b = static_cast<C>(param);
  constexpr auto kSize = static_cast<int64_t>(sizeof(T));
  const auto at = [](char* const* p, const int64_t* s, int k, int64_t i) {
    return static_cast<C>(*reinterpret_cast<const T*>(p[k] + i * s[k]));
  };
  if (pw.defined()) {
    const ElementwiseIter it(out, {&x, &y, &pw});
    it.for_each([b, at](char* const* p, const int64_t* s, int64_t n) {
      if (s[0] == kSize && s[1] == kSize && s[2] == kSize && s[3] == kSize) {
        return term_row<T, K, P, true>(
            reinterpret_cast<T*>(p[0]), n, b, reinterpret_cast<const T*>(p[1]),
            reinterpret_cast<const T*>(p[2]), reinterpret_cast<const T*>(p[3]));
      }
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<T*>(p[0] + i * s[0]) =
            convert<T>(term_of<K, P, C>(at(p, s, 1, i), at(p, s, 2, i), at(p, s, 3, i), b));
      }
    });
  } else {
    const ElementwiseIter it(out, {&x, &y});
    it.for_each([b, at](char* const* p, const int64_t* s, int64_t n) {
      if (s[0] == kSize && s[1] == kSize && s[2] == kSize) {
        if constexpr (K == LossKind::kBceWithLogits &&
                      (P == LossPart::kValue || P == LossPart::kGradInput)) {
          return bce_with_logits_row_cpu(dtype_of<T>::value, P == LossPart::kGradInput, p[0], p[1],
                                         p[2], n);
        }
        return term_row<T, K, P, false>(reinterpret_cast<T*>(p[0]), n, b,
                                        reinterpret_cast<const T*>(p[1]),
                                        reinterpret_cast<const T*>(p[2]), nullptr);
      }
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<T*>(p[0] + i * s[0]) =
            convert<T>(term_of<K, P, C>(at(p, s, 1, i), at(p, s, 2, i), C(1), b));
      }
    });
  }
}

template <typename T, LossKind K>
void run_kind(LossPart part, double param, const Tensor& out, const Tensor& x, const Tensor& y,
              const Tensor& pw) {
  switch (part) {
    case LossPart::kValue:
      return run_terms<T, K, LossPart::kValue>(param, out, x, y, pw);
    case LossPart::kGradInput:
      return run_terms<T, K, LossPart::kGradInput>(param, out, x, y, pw);
    case LossPart::kGradTarget:
      return run_terms<T, K, LossPart::kGradTarget>(param, out, x, y, pw);
    case LossPart::kGradPosWeight:
      if constexpr (K == LossKind::kBceWithLogits) {
        return run_terms<T, K, LossPart::kGradPosWeight>(param, out, x, y, pw);
      }
      break;
  }
}

// LossTerm itself, per element in double: the combinations no caller uses (a pos_weight but
// for bce_with_logits, kGradPosWeight of another loss), kept as they were.
template <typename T>
void terms_generic(const LossTerm& term, const Tensor& out, const Tensor& x, const Tensor& y,
                   const Tensor& pw) {
  using C = compute_t<T>;
  if (pw.defined()) {
    const ElementwiseIter it(out, {&x, &y, &pw});
    cpu_kernel<T, T, T, T>(it, [term](C a, C b, C p) { return term(a, b, p); });
  } else {
    const ElementwiseIter it(out, {&x, &y});
    cpu_kernel<T, T, T>(it, [term](C a, C b) { return term(a, b); });
  }
}

template <typename T>
void terms_cpu(const LossTerm& term, const Tensor& out, const Tensor& x, const Tensor& y,
               const Tensor& pw) {
  const bool usual =
      (!pw.defined() || term.kind == LossKind::kBceWithLogits) &&
      (term.part != LossPart::kGradPosWeight || term.kind == LossKind::kBceWithLogits);
  if (!usual) return terms_generic<T>(term, out, x, y, pw);
  const double p = term.param;
  switch (term.kind) {
    case LossKind::kMse:
      return run_kind<T, LossKind::kMse>(term.part, p, out, x, y, pw);
    case LossKind::kL1:
      return run_kind<T, LossKind::kL1>(term.part, p, out, x, y, pw);
    case LossKind::kSmoothL1:
      return run_kind<T, LossKind::kSmoothL1>(term.part, p, out, x, y, pw);
    case LossKind::kHuber:
      return run_kind<T, LossKind::kHuber>(term.part, p, out, x, y, pw);
    case LossKind::kBce:
      return run_kind<T, LossKind::kBce>(term.part, p, out, x, y, pw);
    case LossKind::kBceWithLogits:
      return run_kind<T, LossKind::kBceWithLogits>(term.part, p, out, x, y, pw);
    case LossKind::kKlDiv:
      return run_kind<T, LossKind::kKlDiv>(term.part, p, out, x, y, pw);
    case LossKind::kKlDivLogTarget:
      return run_kind<T, LossKind::kKlDivLogTarget>(term.part, p, out, x, y, pw);
  }
}

}  // namespace

Tensor loss_terms(const LossTerm& term, const Tensor& x, const Tensor& y, const Tensor& pw) {
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype(), x.device()));
  if (x.device().is_cuda()) {
    loss_terms_cuda(term, out, x, y, pw);
    return out;
  }
  dispatch_floating(x.dtype(), loss_name(term.kind),
                    [&]<typename T>() { terms_cpu<T>(term, out, x, y, pw); });
  return out;
}

}  // namespace dtensor::detail
