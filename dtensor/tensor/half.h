// 16-bit floating types stored as raw bits: IEEE binary16 (Half) and bfloat16 (BFloat16).
// Arithmetic is done in float (convert, compute, round back with round-to-nearest-even),
// which is what every kernel in the library does for these types.
#pragma once

#include <cstdint>
#include <cstring>

#include "dtensor/tensor/macros.h"

namespace dtensor {

namespace detail {

// The bits of a float and back (memcpy is the portable type pun; it compiles to a register
// move on the host and in CUDA device code alike).
DT_HOST_DEVICE DT_FORCE_INLINE uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

DT_HOST_DEVICE DT_FORCE_INLINE float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// float -> binary16, round to nearest even; overflow gives inf, NaN stays NaN.
DT_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Add 0.5 (as float) so that the FPU's own round-to-nearest-even does the rounding at
    // the half-subnormal quantum 2^-24; the low bits of the sum are the half's bits.
    float r = bits_float(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (float_bits(r) - 0x3f000000u));
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (abs >> 13));
}

DT_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    // zero or subnormal: value = mant * 2^-24, exact in float
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float -> bfloat16, round to nearest even; NaN stays a quiet NaN.
DT_HOST_DEVICE inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

DT_HOST_DEVICE DT_FORCE_INLINE float bf16_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// A 16-bit float stored as its bits; Codec's encode / decode convert from and to float.
template <typename Codec>
struct Float16Storage {
  uint16_t bits = 0;
  Float16Storage() = default;
  DT_HOST_DEVICE Float16Storage(float f) : bits(Codec::encode(f)) {}
  DT_HOST_DEVICE operator float() const { return Codec::decode(bits); }
  DT_HOST_DEVICE static Float16Storage from_bits(uint16_t b) {
    Float16Storage h;
    h.bits = b;
    return h;
  }
};

struct HalfCodec {
  DT_HOST_DEVICE static uint16_t encode(float f) { return float_to_half_bits(f); }
  DT_HOST_DEVICE static float decode(uint16_t b) { return half_bits_to_float(b); }
};

struct BFloat16Codec {
  DT_HOST_DEVICE static uint16_t encode(float f) { return float_to_bf16_bits(f); }
  DT_HOST_DEVICE static float decode(uint16_t b) { return bf16_bits_to_float(b); }
};

}  // namespace detail

// Distinct types (dtype_of_v and the kernels' dispatch tell them apart), one implementation.
using Half = detail::Float16Storage<detail::HalfCodec>;
using BFloat16 = detail::Float16Storage<detail::BFloat16Codec>;

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

// The type arithmetic is done in: float for the 16-bit floats, the type itself otherwise. Here,
// with the types, so that headers kept free of the library's (rng/detail/distributions_impl.h)
// use the same rule.
template <typename T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<Half> {
  using type = float;
};
template <>
struct compute_type<BFloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename compute_type<T>::type;

}  // namespace dtensor
