// Per-target building blocks of the vectorised CPU kernels (Google Highway): loads and stores
// of every floating element type as vectors of its compute type, the transcendental functions
// with IEEE edge cases, the activations and their derivatives, and a row driver. Included by
// the kernel files through simd_kernel-inl.h (after <hwy/foreach_target.h>), once
// per compiled target, hence the toggling include guard instead of #pragma once.
//
// Compute types: float for float32, float16 and bfloat16 (16-bit values are widened exactly and
// rounded once to nearest even on store, as the scalar conversions in tensor/half.h do), double
// for float64.
//
// Accuracy: exp, log and tanh are Highway's contrib math (max error 1, 4 and 4 ulp), erfc is
// SLEEF's (1.5 ulp). Highway documents a valid input range only, so the wrappers here add what
// PyTorch's results need outside it: NaN in gives NaN out, exp overflows to +inf, log(0) is
// -inf, log of a negative number NaN, log(+inf) +inf.

#if defined(DTENSOR_OPS_COMMON_SIMD_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DTENSOR_OPS_COMMON_SIMD_MATH_INL_H_
#undef DTENSOR_OPS_COMMON_SIMD_MATH_INL_H_
#else
#define DTENSOR_OPS_COMMON_SIMD_MATH_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/half.h"

HWY_BEFORE_NAMESPACE();

// SLEEF's erfc for the vector widths of the x86 targets. <sleef.h> declares them only when the
// file is compiled with -mavx2 / -mavx512f, while Highway compiles each target inside a
// `#pragma GCC target` region instead (opened by HWY_BEFORE_NAMESPACE), so the functions used are
// declared here, inside that region where their vector types are legal arguments.
#if HWY_TARGET == HWY_AVX2
extern "C" __m256 Sleef_erfcf8_u15avx2(__m256);
extern "C" __m256d Sleef_erfcd4_u15avx2(__m256d);
#elif HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
extern "C" __m512 Sleef_erfcf16_u15avx512f(__m512);
extern "C" __m512d Sleef_erfcd8_u15avx512f(__m512d);
#endif

namespace dtensor::detail::HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// The compute type of element type T, and the full vector of it.
template <typename T>
using simd_compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
template <typename T>
using ComputeTag = hn::ScalableTag<simd_compute_t<T>>;

// ---- loads and stores -------------------------------------------------------------------------

// Lanes(d) elements of type T at p as a vector of the compute type.
template <typename T, class D>
HWY_INLINE hn::Vec<D> LoadC(D d, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return hn::LoadU(d, p);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    // The widening is a shift on every target: exact.
    const hn::Rebind<hwy::bfloat16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::bfloat16_t*>(p)));
  } else {
    static_assert(std::is_same_v<T, Half>);
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
    // Highway's portable float16 widening maps inf/NaN to finite values: convert per lane.
    HWY_ALIGN float buf[hn::MaxLanes(d)];
    for (size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = static_cast<float>(p[i]);
    return hn::Load(d, buf);
#else
    const hn::Rebind<hwy::float16_t, D> dh;  // F16C / NEON conversion: exact
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
#endif
  }
}

// Stores v (compute type) as Lanes(d) elements of type T at p, rounding 16-bit results to
// nearest even exactly as Half(float) / BFloat16(float) do.
template <typename T, class D>
HWY_INLINE void StoreC(D d, hn::Vec<D> v, T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    hn::StoreU(v, d, p);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    // Highway's bfloat16 demotion truncates; round to nearest even in integer arithmetic
    // (float_to_bf16_bits): add 0x7fff plus the lowest kept bit, keep the high half; NaN keeps
    // its sign and high payload and is made quiet.
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto bits = hn::BitCast(du, v);
    const auto high = hn::ShiftRight<16>(bits);
    const auto lsb = hn::And(high, hn::Set(du, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), lsb)));
    const auto nan = hn::Or(high, hn::Set(du, 0x40u));
    const auto r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, rounded);
    const hn::Rebind<uint16_t, D> d16;
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, r)), d16, reinterpret_cast<uint16_t*>(p));
  } else {
    static_assert(std::is_same_v<T, Half>);
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
    // Highway's portable float16 narrowing truncates: convert per lane.
    HWY_ALIGN float buf[hn::MaxLanes(d)];
    hn::Store(v, d, buf);
    for (size_t i = 0; i < hn::Lanes(d); ++i) p[i] = Half(buf[i]);
#else
    const hn::Rebind<hwy::float16_t, D> dh;  // F16C: round to nearest even
    hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
#endif
  }
}

// ---- transcendental functions with IEEE edge cases ----------------------------------------------

// e^x. Highway's Exp is valid up to 104 (float) / 706 (double) and maps NaN to 0; clamping to
// 100 / 710 keeps its exponent arithmetic in range while still overflowing to +inf.
template <class D, class V>
HWY_INLINE V ExpC(D d, V x) {
  using T = hn::TFromD<D>;
  const V clamp = hn::Set(d, static_cast<T>(sizeof(T) == 4 ? 100.0 : 710.0));
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Exp(d, hn::Min(x, clamp)));
}

// e^x for x <= 0 (softmax's x - max), -inf included; NaN gives an unspecified value (callers
// detect NaN rows themselves). float: Highway's own range reduction and polynomial
// (impl::ExpImpl<float>, the pieces of hn::Exp) with a reconstruction for this range only,
// about 2/3 of hn::Exp's instructions: x is clamped to >= -88 (e^-88 < 2^-126: results below
// the smallest normal float flush to 0, an absolute error < 1.2e-38), q = round(x / ln 2) comes
// from the 1.5 * 2^23 rounding constant instead of a checked float-to-int conversion, and 2^q is
// one exponent-field construction (q >= -127; q = -127 gives +0). double: hn::Exp.
template <class D, class V>
HWY_INLINE V ExpNonPositive(D d, V x) {
  using T = hn::TFromD<D>;
  if constexpr (sizeof(T) == 4) {
    const hn::RebindToSigned<D> di;
    hn::impl::ExpImpl<float> impl;
    const V kRound = hn::Set(d, 12582912.0f);  // 1.5 * 2^23
    const V xc = hn::Max(x, hn::Set(d, -88.0f));
    const V t = hn::MulAdd(xc, hn::Set(d, 1.442695040888963407359924681f), kRound);
    const auto q = hn::Sub(hn::BitCast(di, t), hn::BitCast(di, kRound));
    const V p = hn::Add(impl.ExpPoly(d, impl.ExpReduce(d, xc, q)), hn::Set(d, 1.0f));
    return hn::Mul(p, impl.Pow2I(d, q));
  } else {
    return hn::Exp(d, x);
  }
}

// log(x): log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, NaN stays NaN.
template <class D, class V>
HWY_INLINE V LogC(D d, V x) {
  const V zero = hn::Zero(d);
  V y = hn::Log(d, x);
  y = hn::IfThenElse(hn::Eq(x, zero), hn::Neg(hn::Inf(d)), y);
  y = hn::IfThenElse(hn::Eq(x, hn::Inf(d)), x, y);
  y = hn::IfThenElse(hn::Lt(x, zero), hn::NaN(d), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

template <class D, class V>
HWY_INLINE V TanhC(D d, V x) {
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Tanh(d, x));
}

// erfc(x) through SLEEF's vector functions; the portable fallback calls std::erfc per lane.
template <class D, class V>
HWY_INLINE V ErfcC(D d, V x) {
  using T = hn::TFromD<D>;
#if HWY_TARGET == HWY_AVX2
  if constexpr (sizeof(T) == 4) {
    return V{Sleef_erfcf8_u15avx2(x.raw)};
  } else {
    return V{Sleef_erfcd4_u15avx2(x.raw)};
  }
#elif HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (sizeof(T) == 4) {
    return V{Sleef_erfcf16_u15avx512f(x.raw)};
  } else {
    return V{Sleef_erfcd8_u15avx512f(x.raw)};
  }
#else
  HWY_ALIGN T buf[hn::MaxLanes(d)];
  hn::Store(x, d, buf);
  for (size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = std::erfc(buf[i]);
  return hn::Load(d, buf);
#endif
}

// ---- activations and their derivatives ----------------------------------------------------------
// The formulas are the scalar kernels' (elementwise_unary_cpu.cc before vectorisation, and the
// CUDA kernels): 1 + erf(x) and 1 + tanh(u) are never formed, because they cancel at large
// negative arguments; 1 + erf(-z) = erfc(z) and 1 + tanh(u) = 2 sigmoid(2u).

template <typename T>
inline constexpr T kSqrtHalf = T(0.70710678118654752440);  // 1/sqrt(2)
template <typename T>
inline constexpr T kInvSqrt2Pi = T(0.39894228040143267794);  // 1/sqrt(2 pi)
template <typename T>
inline constexpr T kSqrt2OverPi = T(0.79788456080286535588);  // sqrt(2/pi)
template <typename T>
inline constexpr T kGeluCubic = T(0.044715);

// 1 / (1 + e^-x)
template <class D, class V>
HWY_INLINE V SigmoidC(D d, V x) {
  const V one = hn::Set(d, hn::TFromD<D>(1));
  return hn::Div(one, hn::Add(one, ExpC(d, hn::Neg(x))));
}

// x / (1 + e^-x)
template <class D, class V>
HWY_INLINE V SiluC(D d, V x) {
  const V one = hn::Set(d, hn::TFromD<D>(1));
  return hn::Div(x, hn::Add(one, ExpC(d, hn::Neg(x))));
}

// 0.5 x erfc(-x / sqrt(2))
template <class D, class V>
HWY_INLINE V GeluErfC(D d, V x) {
  using T = hn::TFromD<D>;
  const V e = ErfcC(d, hn::Mul(x, hn::Set(d, -kSqrtHalf<T>)));
  return hn::Mul(hn::Mul(hn::Set(d, T(0.5)), x), e);
}

// sqrt(2/pi) (x + 0.044715 x^3)
template <class D, class V>
HWY_INLINE V GeluTanhArg(D d, V x) {
  using T = hn::TFromD<D>;
  const V x3 = hn::Mul(hn::Mul(x, x), x);
  return hn::Mul(hn::Set(d, kSqrt2OverPi<T>), hn::MulAdd(hn::Set(d, kGeluCubic<T>), x3, x));
}

// 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u))
template <class D, class V>
HWY_INLINE V GeluTanhC(D d, V x) {
  using T = hn::TFromD<D>;
  const V u = GeluTanhArg(d, x);
  return hn::Div(x, hn::Add(hn::Set(d, T(1)), ExpC(d, hn::Mul(hn::Set(d, T(-2)), u))));
}

// d/dx [x Phi(x)] = Phi(x) + x phi(x), Phi(x) = 0.5 erfc(-x / sqrt(2)),
// phi(x) = e^(-x^2 / 2) / sqrt(2 pi).
template <class D, class V>
HWY_INLINE V GeluErfGradC(D d, V x) {
  using T = hn::TFromD<D>;
  const V cdf = hn::Mul(hn::Set(d, T(0.5)), ErfcC(d, hn::Mul(x, hn::Set(d, -kSqrtHalf<T>))));
  const V pdf =
      hn::Mul(hn::Set(d, kInvSqrt2Pi<T>), ExpC(d, hn::Mul(hn::Set(d, T(-0.5)), hn::Mul(x, x))));
  return hn::MulAdd(x, pdf, cdf);
}

// d/dx [0.5 x (1 + tanh(u))] with s = sigmoid(2u) = 0.5 (1 + tanh(u)), 1 - tanh(u)^2 =
// 4 s (1 - s): s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class D, class V>
HWY_INLINE V GeluTanhGradC(D d, V x) {
  using T = hn::TFromD<D>;
  const V one = hn::Set(d, T(1));
  const V s = SigmoidC(d, hn::Mul(hn::Set(d, T(2)), GeluTanhArg(d, x)));
  const V du = hn::Mul(hn::Set(d, kSqrt2OverPi<T>),
                       hn::MulAdd(hn::Set(d, T(3) * kGeluCubic<T>), hn::Mul(x, x), one));
  const V t = hn::Mul(hn::Mul(hn::Set(d, T(2)), x), hn::Mul(s, hn::Sub(one, s)));
  return hn::MulAdd(t, du, s);
}

// d/dx [x sigmoid(x)] = s (1 + x (1 - s))
template <class D, class V>
HWY_INLINE V SiluGradC(D d, V x) {
  const V one = hn::Set(d, hn::TFromD<D>(1));
  const V s = SigmoidC(d, x);
  return hn::Mul(s, hn::MulAdd(x, hn::Sub(one, s), one));
}

// ---- row drivers --------------------------------------------------------------------------------

// out[i] = f(d, in0[i], in1[i], ...) for i < n: contiguous arrays of one element type T; the
// vector op f receives and returns compute-type vectors. The tail (n not a multiple of the
// vector width) goes through zero-padded buffers, so every element is computed by the same
// vector code whatever its position. out may be one of the inputs (in place).
template <typename T, class F, typename... P>
HWY_INLINE void MapRow(T* out, int64_t n, const F& f, const P*... in) {
  static_assert((std::is_same_v<T, P> && ...), "MapRow: one element type");
  const ComputeTag<T> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) StoreC(d, f(d, LoadC(d, in + i)...), out + i);
  if (i == n) return;
  constexpr size_t kMax = hn::MaxLanes(d);
  const size_t rest = static_cast<size_t>(n - i);
  struct Padded {
    T v[kMax] = {};
  };
  const auto pad = [&](const T* p) {
    Padded b;
    std::memcpy(b.v, p, rest * sizeof(T));
    return b;
  };
  Padded o;
  const auto run = [&](const auto&... b) { StoreC(d, f(d, LoadC(d, b.v)...), o.v); };
  run(pad(in + i)...);
  std::memcpy(out + i, o.v, rest * sizeof(T));
}

// sum_i f(d, in0[i], in1[i], ...) over contiguous rows of n elements of type T, in the compute
// type with kSumAcc independent vector accumulators; the lanes past the end of the rows are
// masked out of the sum (so f need not vanish at 0).
inline constexpr int kSumAcc = 4;

template <typename T, class F, typename... P>
HWY_INLINE simd_compute_t<T> SumMap(int64_t n, const F& f, const P* HWY_RESTRICT... in) {
  static_assert((std::is_same_v<T, P> && ...), "SumMap: one element type");
  const ComputeTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[kSumAcc];
  for (auto& a : acc) a = hn::Zero(d);
  int64_t i = 0;
  for (; i + kSumAcc * lanes <= n; i += kSumAcc * lanes) {
    for (int k = 0; k < kSumAcc; ++k) {
      acc[k] = hn::Add(acc[k], f(d, LoadC(d, in + i + k * lanes)...));
    }
  }
  for (; i < n; i += lanes) {
    const int64_t len = n - i < lanes ? n - i : lanes;
    const auto pad = [&](const T* p) {
      struct {
        T v[hn::MaxLanes(d)] = {};
      } b;
      std::memcpy(b.v, p, static_cast<size_t>(len) * sizeof(T));
      return b;
    };
    const auto valid = hn::FirstN(d, static_cast<size_t>(len));
    const auto run = [&](const auto&... b) { return f(d, LoadC(d, b.v)...); };
    acc[0] = hn::Add(acc[0], hn::IfThenElseZero(valid, run(pad(in + i)...)));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(acc[0], acc[1]), hn::Add(acc[2], acc[3]))));
}

}  // namespace dtensor::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // DTENSOR_OPS_COMMON_SIMD_MATH_INL_H_
