// Per-element math of every random distribution: Philox words -> one value. __host__
// __device__ and free of library headers other than half.h, so the CPU loops (fill_cpu.cc)
// and the CUDA kernels (random_cuda.cu) evaluate exactly the same formulas. The formulas are
// the documented contract (docs/RNG.md); changing one changes every generated value.
//
// Each op is a small functor with kWords (W, words per element) and
// `T operator()(const uint32_t* w)` reading w[0..W).
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "dtensor/tensor/half.h"
#include "dtensor/tensor/macros.h"

namespace dtensor::detail {

// ---- exact unit uniforms: k * 2^-bits with k uniform over [0, 2^bits) ----------------------
// (integers go through int32/int64 before float conversion: same value, and x86 vectorises it)
// float32: 24 bits -> [0, 1 - 2^-24]
DT_HOST_DEVICE DT_FORCE_INLINE float unit_f32(uint32_t u) {
  return static_cast<float>(static_cast<int32_t>(u >> 8)) * 0x1p-24f;
}
// float64: 53 bits from two words, the low word w0 supplying the low 32 bits.
DT_HOST_DEVICE DT_FORCE_INLINE double unit_f64(uint32_t w0, uint32_t w1) {
  const uint64_t x = static_cast<uint64_t>(w0) | (static_cast<uint64_t>(w1) << 32);
  return static_cast<double>(static_cast<int64_t>(x >> 11)) * 0x1p-53;
}
// bfloat16: 8 bits (every value exactly representable in bfloat16)
DT_HOST_DEVICE DT_FORCE_INLINE float unit_bf16(uint32_t u) {
  return static_cast<float>(static_cast<int32_t>(u >> 24)) * 0x1p-8f;
}
// float16: 11 bits (every value exactly representable in float16)
DT_HOST_DEVICE DT_FORCE_INLINE float unit_f16(uint32_t u) {
  return static_cast<float>(static_cast<int32_t>(u >> 21)) * 0x1p-11f;
}

// a + s * x rounded twice (never fused into an fma), identically on host and device.
DT_HOST_DEVICE DT_FORCE_INLINE float affine_f32(float a, float s, float x) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, __fmul_rn(s, x));
#else
  return a + s * x;
#endif
}
DT_HOST_DEVICE DT_FORCE_INLINE double affine_f64(double a, double s, double x) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, __dmul_rn(s, x));
#else
  return a + s * x;
#endif
}

// ---- uniform [low, high) --------------------------------------------------------------------
// value = low + (high - low) * unit, in float (float32/16-bit types, rounded to T afterwards)
// or double (float64). With low = 0, high = 1 the value is the exact unit uniform (< 1).
template <typename T>
struct UniformOp {
  using C = compute_t<T>;
  static constexpr int kWords = sizeof(T) == 8 ? 2 : 1;
  C low, range;
  DT_HOST_DEVICE DT_FORCE_INLINE T operator()(const uint32_t* w) const {
    if constexpr (sizeof(T) == 8) {
      return affine_f64(low, range, unit_f64(w[0], w[1]));
    } else if constexpr (sizeof(T) == 4) {
      return affine_f32(low, range, unit_f32(w[0]));
    } else {
      const float u = std::is_same_v<T, Half> ? unit_f16(w[0]) : unit_bf16(w[0]);
      return T(affine_f32(low, range, u));
    }
  }
};

// ---- normal (Box-Muller, one normal per element) --------------------------------------------
// a = (k0 + 1) * 2^-b in (0, 1] (log never sees 0), c = k1 * 2^-b in [0, 1),
// z = sqrt(-2 ln a) * cos(2 pi c), value = mean + std * z.
// float32 and the 16-bit types: b = 24 from words w0, w1, computed in float with the
// branch-free log and cos below (Cephes polynomials, every operation rounded separately), so
// the CPU loops vectorise and CPU and CUDA agree bit for bit. float64: b = 53 from the word
// pairs (w0, w1) and (w2, w3), computed with the C library's log/cos in double (not promised
// bit-identical across CPU and CUDA).

// Separately rounded float multiply/add: never contracted into an fma on either side.
DT_HOST_DEVICE DT_FORCE_INLINE float fmul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DT_HOST_DEVICE DT_FORCE_INLINE float fadd_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
DT_HOST_DEVICE DT_FORCE_INLINE float fsqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return __builtin_sqrtf(a);
#endif
}

// -2 ln(k * 2^-24) for k in [1, 2^24]. a = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln a =
// e ln 2 + ln(1 + x), x = m - 1, with Cephes logf's degree-8 polynomial and ln 2 split in two.
DT_HOST_DEVICE DT_FORCE_INLINE float neg2_log_unit24(uint32_t k) {
  const uint32_t ix = float_bits(static_cast<float>(static_cast<int32_t>(k)) * 0x1p-24f);
  const float m = bits_float((ix & 0x007fffffu) | 0x3f000000u);  // [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  const int32_t e = static_cast<int32_t>(ix >> 23) - 126 - (low ? 1 : 0);
  // Both candidates are computed, then selected: branch-free, so the CPU loops vectorise.
  const float x_low = fadd_rn(fadd_rn(m, m), -1.0f);  // exact
  const float x_high = fadd_rn(m, -1.0f);             // exact
  const float x = low ? x_low : x_high;
  const float z = fmul_rn(x, x);
  float y = 7.0376836292e-2f;
  y = fadd_rn(fmul_rn(y, x), -1.1514610310e-1f);
  y = fadd_rn(fmul_rn(y, x), 1.1676998740e-1f);
  y = fadd_rn(fmul_rn(y, x), -1.2420140846e-1f);
  y = fadd_rn(fmul_rn(y, x), 1.4249322787e-1f);
  y = fadd_rn(fmul_rn(y, x), -1.6668057665e-1f);
  y = fadd_rn(fmul_rn(y, x), 2.0000714765e-1f);
  y = fadd_rn(fmul_rn(y, x), -2.4999993993e-1f);
  y = fadd_rn(fmul_rn(y, x), 3.3333331174e-1f);
  y = fmul_rn(fmul_rn(y, x), z);
  const float fe = static_cast<float>(e);
  y = fadd_rn(y, fmul_rn(fe, -2.12194440e-4f));
  y = fadd_rn(y, fmul_rn(z, -0.5f));
  float r = fadd_rn(x, y);
  r = fadd_rn(r, fmul_rn(fe, 0.693359375f));
  return fmul_rn(r, -2.0f);
}

// cos(2 pi j 2^-24) for j in [0, 2^24): exact quadrant reduction on the integer
// (j = q 2^22 + r, r in [-2^21, 2^21)), theta = r * (2 pi 2^-24) in [-pi/4, pi/4], then Cephes
// sinf/cosf polynomials and the quadrant's sign/swap.
DT_HOST_DEVICE DT_FORCE_INLINE float cos_2pi_unit24(uint32_t j) {
  const uint32_t q = (j + (1u << 21)) >> 22;  // 0..4
  const int32_t r = static_cast<int32_t>(j) - static_cast<int32_t>(q << 22);
  const float t = fmul_rn(static_cast<float>(r), 6.2831853071795864769f * 0x1p-24f);
  const float zz = fmul_rn(t, t);
  float ps = fadd_rn(fmul_rn(-1.9515295891e-4f, zz), 8.3321608736e-3f);
  ps = fadd_rn(fmul_rn(ps, zz), -1.6666654611e-1f);
  const float sin_t = fadd_rn(t, fmul_rn(fmul_rn(ps, zz), t));
  float pc = fadd_rn(fmul_rn(2.443315711809948e-5f, zz), -1.388731625493765e-3f);
  pc = fadd_rn(fmul_rn(pc, zz), 4.166664568298827e-2f);
  const float cos_t = fadd_rn(fadd_rn(fmul_rn(fmul_rn(pc, zz), zz), fmul_rn(zz, -0.5f)), 1.0f);
  const uint32_t quadrant = q & 3u;
  const float v = (quadrant & 1u) ? sin_t : cos_t;
  const uint32_t sign = (quadrant == 1u || quadrant == 2u) ? 0x80000000u : 0u;
  return bits_float(float_bits(v) ^ sign);
}

DT_HOST_DEVICE DT_FORCE_INLINE float box_muller_f32(uint32_t w0, uint32_t w1) {
  return fmul_rn(fsqrt_rn(neg2_log_unit24((w0 >> 8) + 1u)), cos_2pi_unit24(w1 >> 8));
}
DT_HOST_DEVICE DT_FORCE_INLINE double box_muller_f64(const uint32_t* w) {
  const uint64_t x0 = static_cast<uint64_t>(w[0]) | (static_cast<uint64_t>(w[1]) << 32);
  const uint64_t x1 = static_cast<uint64_t>(w[2]) | (static_cast<uint64_t>(w[3]) << 32);
  const double a = static_cast<double>((x0 >> 11) + 1u) * 0x1p-53;
  const double c = static_cast<double>(x1 >> 11) * 0x1p-53;
  return sqrt(-2.0 * log(a)) * cos(6.2831853071795864769 * c);
}

template <typename T>
struct NormalOp {
  using C = compute_t<T>;
  static constexpr int kWords = sizeof(T) == 8 ? 4 : 2;
  C mean, stddev;
  DT_HOST_DEVICE DT_FORCE_INLINE T operator()(const uint32_t* w) const {
    if constexpr (sizeof(T) == 8) {
      return affine_f64(mean, stddev, box_muller_f64(w));
    } else {
      return T(affine_f32(mean, stddev, box_muller_f32(w[0], w[1])));
    }
  }
};

// ---- bernoulli / dropout --------------------------------------------------------------------
// "u * 2^-32 < p" for a word u, evaluated exactly as u < ceil(p * 2^32) (p * 2^32 is exact in
// double). p = 0 -> threshold 0 (never), p = 1 -> 2^32 (always).
inline uint64_t bernoulli_threshold(double p) {
  const double x = p * 0x1p32;
  uint64_t t = static_cast<uint64_t>(x);  // floor for x >= 0
  if (static_cast<double>(t) < x) ++t;
  return t;
}

template <typename T>
struct BernoulliOp {
  static constexpr int kWords = 1;
  uint64_t threshold;
  DT_HOST_DEVICE DT_FORCE_INLINE T operator()(const uint32_t* w) const {
    const bool one = static_cast<uint64_t>(w[0]) < threshold;
    if constexpr (sizeof(T) == 2) {
      return T(one ? 1.0f : 0.0f);
    } else {
      return static_cast<T>(one);
    }
  }
};

// Dropout keeps an element when its unit uniform u * 2^-32 >= p, i.e. u >= threshold(p).
DT_HOST_DEVICE DT_FORCE_INLINE bool dropout_keep(uint32_t w, uint64_t threshold) {
  return static_cast<uint64_t>(w) >= threshold;
}

// The scaled dropout mask: keep ? 1 / (1 - p) : 0 (scale = 0 when p == 1).
template <typename T>
struct DropoutMaskOp {
  using C = compute_t<T>;
  static constexpr int kWords = 1;
  uint64_t threshold;
  C scale;
  DT_HOST_DEVICE DT_FORCE_INLINE T operator()(const uint32_t* w) const {
    return T(dropout_keep(w[0], threshold) ? scale : C(0));
  }
};

// ---- randint [low, high) --------------------------------------------------------------------
// x = w0 | w1 << 32, value = low + x mod (high - low). The modulo bias is below
// (high - low) / 2^64 per value: invisible for any range a tensor can hold.
template <typename T>
struct RandintOp {
  static constexpr int kWords = 2;
  int64_t low;
  uint64_t range;
  DT_HOST_DEVICE DT_FORCE_INLINE T operator()(const uint32_t* w) const {
    const uint64_t x = static_cast<uint64_t>(w[0]) | (static_cast<uint64_t>(w[1]) << 32);
    const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + x % range);
    if constexpr (sizeof(T) == 2) {
      return T(static_cast<float>(v));
    } else {
      return static_cast<T>(v);
    }
  }
};

}  // namespace dtensor::detail
