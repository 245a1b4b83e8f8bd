// Per-target building blocks of the vectorised CPU kernels (Google Highway): loads and stores
// of every floating element type as vectors of its compute type, the transcendental functions
// with IEEE edge cases, the activations and their derivatives, and a row driver. Included by
// the kernel files through simd_kernel-inl.h (after <hwy/foreach_target.h>), once
// per compiled target, hence the toggling include guard instead of #pragma once.
//
// Compute types: float for float32, float16 and bfloat16 (16-bit values are widened exactly and
// rounded once to nearest even on store, as the scalar conversions in dtensor/tensor/half.h do),
// double for float64.
//
// Accuracy: exp, log and tanh are Highway's contrib math (max error 1, 4 and 4 ulp); erfc is
// SLEEF's in double (1.5 ulp) and ErfcFloat below in float (5.5 ulp). Highway documents a valid
// input range only, so the wrappers here add what PyTorch's results need outside it: NaN in
// gives NaN out, exp overflows to +inf, log(0) is -inf, log of a negative number NaN, log(+inf)
// +inf.

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

#include "dtensor/tensor/half.h"

HWY_BEFORE_NAMESPACE();

// SLEEF's erfc for the vector widths of the x86 targets. <sleef.h> declares them only when the
// file is compiled with -mavx2 / -mavx512f, while Highway compiles each target inside a
// `#pragma GCC target` region instead (opened by HWY_BEFORE_NAMESPACE), so the functions used are
// declared here, inside that region where their vector types are legal arguments.
#if HWY_TARGET == HWY_AVX2
extern "C" __m256d Sleef_erfcd4_u15avx2(__m256d);
#elif HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
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

// The float64 accumulation of float32 / 16-bit data (the reductions, batch norm's statistics)
// works on full double vectors (DD, VD) and keeps kAcc independent vector accumulators in its
// sum loops (the order of the additions differs from a sequential loop, each partial sum is
// still double).
using DD = hn::ScalableTag<double>;
using VD = hn::Vec<DD>;
constexpr int kAcc = 4;

// Lanes of a full double vector of elements of type T at p, widened to double.
template <typename T>
HWY_INLINE VD LoadDouble(const T* HWY_RESTRICT p) {
  const DD dd;
  if constexpr (std::is_same_v<T, double>) {
    return hn::LoadU(dd, p);
  } else {
    const hn::Rebind<float, decltype(dd)> df;
    return hn::PromoteTo(dd, LoadC(df, p));
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

// e^x for x <= 0 down to the smallest float results (x >= -103.9), where ExpNonPositive stops at
// -88: from x < -80 on, e^(x + 24) (a normal float) is scaled by e^-24, so results below the
// smallest normal float come out as the nearest subnormals instead of 0. For silu, sigmoid and
// erfc, whose values there are normal floats times x or a bounded factor (silu(-88) = -5.3e-37).
template <class D, class V>
HWY_INLINE V ExpNonPositiveWide(D d, V x) {
  using T = hn::TFromD<D>;
  if constexpr (sizeof(T) == 4) {
    const auto far = hn::Lt(x, hn::Set(d, -80.0f));
    // Such arguments are rare (silu(-80) is already -1.4e-33): one test per vector keeps the
    // common case at ExpNonPositive's cost.
    if (HWY_LIKELY(hn::AllFalse(d, far))) return ExpNonPositive(d, x);
    const V e = ExpNonPositive(d, hn::IfThenElse(far, hn::Add(x, hn::Set(d, 24.0f)), x));
    return hn::IfThenElse(far, hn::Mul(e, hn::Set(d, 3.77513454e-11f)), e);  // e^-24
  } else {
    return ExpNonPositive(d, x);  // double: hn::Exp, subnormal results included
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

// erfc(z) for float lanes, about 20 vector operations and one exponential (SLEEF's erfcf costs
// several times more: gelu was 5.5x PyTorch's time with it). Written here because no library we
// use has a fast float erfc; the coefficients are least-squares fits in float64 (relative error
// of the fits 1.5e-9 and 2.6e-9), and the whole function measured against mpmath's erfc on
// 120,000 points of [-10, 9.19] (float32 arithmetic emulated; erfc is subnormal beyond 9.19) is
// within 3.3e-7 relative (5.5 ulp; SLEEF's: 1.5 ulp), inside the float32 tolerance the kernels
// are held to (1e-6).
//   |z| < 0.5:  1 - z P(z^2), P ~ erf(z) / z;
//   |z| >= 0.5: E = e^(-z^2) t R(t) with t = 1 / (1 + |z| / 2) and R ~ erfc(a) e^(a^2) / t (no
//               cancellation: R stays within [0.282, 0.770]); erfc(z) = E for z > 0, 2 - E
//               below.
// z^2 = hi + lo exactly (a fused multiply-subtract, or Dekker's split where there is no FMA):
// e^(-z^2) = e^(-hi) (1 - lo), which keeps e^(-z^2) accurate where z^2 is large; e^(-hi) reaches
// the subnormal range (ExpNonPositiveWide). E is 0 from |z| > 10.0546875 (erfc below the
// smallest subnormal float there); NaN propagates; erfc(+-inf) = 0, 2.
template <class D, class V>
HWY_INLINE V ErfcFloat(D d, V z) {
  const V one = hn::Set(d, 1.0f);
  const V a = hn::Abs(z);
  const V z2 = hn::Mul(z, z);
  V p = hn::Set(d, 0.00472813984f);
  p = hn::MulAdd(p, z2, hn::Set(d, -0.0267626587f));
  p = hn::MulAdd(p, z2, hn::Set(d, 0.112829186f));
  p = hn::MulAdd(p, z2, hn::Set(d, -0.37612614f));
  p = hn::MulAdd(p, z2, hn::Set(d, 1.12837923f));
  const V small = hn::NegMulAdd(z, p, one);  // 1 - erf(z)
  const V t = hn::Div(one, hn::MulAdd(hn::Set(d, 0.5f), a, one));
  V r = hn::Set(d, -0.0300839022f);
  r = hn::MulAdd(r, t, hn::Set(d, 0.0656992644f));
  r = hn::MulAdd(r, t, hn::Set(d, 0.065052934f));
  r = hn::MulAdd(r, t, hn::Set(d, -0.273963094f));
  r = hn::MulAdd(r, t, hn::Set(d, 0.153491586f));
  r = hn::MulAdd(r, t, hn::Set(d, 0.0179988686f));
  r = hn::MulAdd(r, t, hn::Set(d, 0.193163276f));
  r = hn::MulAdd(r, t, hn::Set(d, 0.244203165f));
  r = hn::MulAdd(r, t, hn::Set(d, 0.282323837f));
  r = hn::MulAdd(r, t, hn::Set(d, 0.282086253f));
  const V cutoff = hn::Set(d, 10.0546875f);
  const V ac = hn::Min(a, cutoff);  // keeps z^2 finite for z = +-inf
  const V hi = hn::Mul(ac, ac);
#if HWY_NATIVE_FMA
  const V lo = hn::MulSub(ac, ac, hi);
#else
  // Dekker: ac = ah + al with ah holding the upper 12 bits, so every partial product is exact.
  const V c = hn::Mul(ac, hn::Set(d, 4097.0f));
  const V ah = hn::Sub(c, hn::Sub(c, ac));
  const V al = hn::Sub(ac, ah);
  const V lo =
      hn::Add(hn::Add(hn::Sub(hn::Mul(ah, ah), hi), hn::Mul(hn::Add(ah, ah), al)), hn::Mul(al, al));
#endif
  const V tr = hn::Mul(t, r);
  V e = hn::Mul(ExpNonPositiveWide(d, hn::Neg(hi)), hn::NegMulAdd(lo, tr, tr));
  e = hn::IfThenZeroElse(hn::Gt(a, cutoff), e);
  const V big = hn::IfThenElse(hn::Lt(z, hn::Zero(d)), hn::Sub(hn::Set(d, 2.0f), e), e);
  const V out = hn::IfThenElse(hn::Lt(a, hn::Set(d, 0.5f)), small, big);
  return hn::IfThenElse(hn::IsNaN(z), z, out);
}

// erfc(x): float lanes through ErfcFloat above; double lanes through SLEEF's vector functions
// (1.5 ulp; the portable fallback calls std::erfc per lane).
template <class D, class V>
HWY_INLINE V ErfcC(D d, V x) {
  using T = hn::TFromD<D>;
  if constexpr (sizeof(T) == 4) {
    return ErfcFloat(d, x);
  } else {
#if HWY_TARGET == HWY_AVX2
    return V{Sleef_erfcd4_u15avx2(x.raw)};
#elif HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    return V{Sleef_erfcd8_u15avx512f(x.raw)};
#else
    HWY_ALIGN T buf[hn::MaxLanes(d)];
    hn::Store(x, d, buf);
    for (size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = std::erfc(buf[i]);
    return hn::Load(d, buf);
#endif
  }
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

// 1 / (1 + e^-x), from e = e^-|x| <= 1 as SiluC: 1 / (1 + e) for x >= 0, e / (1 + e) below;
// NaN passes through.
template <class D, class V>
HWY_INLINE V SigmoidC(D d, V x) {
  const V one = hn::Set(d, hn::TFromD<D>(1));
  const V e = ExpNonPositiveWide(d, hn::Neg(hn::Abs(x)));
  const V num = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), e, one);
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Div(num, hn::Add(one, e)));
}

// x / (1 + e^-x), from e = e^-|x| <= 1 (ExpNonPositiveWide, cheaper than a full exponential):
// x / (1 + e) for x >= 0, x e / (1 + e) below. NaN passes through; silu(-inf) is NaN, as
// -inf / (1 + e^inf) is.
template <class D, class V>
HWY_INLINE V SiluC(D d, V x) {
  const V one = hn::Set(d, hn::TFromD<D>(1));
  const V e = ExpNonPositiveWide(d, hn::Neg(hn::Abs(x)));
  const V num = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(x, e), x);
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Div(num, hn::Add(one, e)));
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
