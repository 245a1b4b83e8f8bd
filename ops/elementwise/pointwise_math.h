// Per-element formulas of the binary math ops (pow with a tensor exponent, fmod, remainder,
// atan2, hypot), nan_to_num and the relu6 of the hard activations, shared by the CPU and CUDA kernels so both give the same values
// (the formulas follow PyTorch's CPU kernels). C is the compute type: float or double for
// floating dtypes (16-bit ones computed in float), the integer type itself otherwise.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/elementwise/int_pow.h"
#include "tensor/macros.h"

namespace dtensor::detail {

// min(max(x, 0), 6) with NaN passing through (fmin / fmax would drop it), for hardsigmoid and
// hardswish on both devices.
template <typename C>
DT_HOST_DEVICE inline C relu6_of(C x) {
  return x < C(0) ? C(0) : (x > C(6) ? C(6) : x);
}

// x ** e. Integers: repeated squaring (wrapping), and for a negative exponent the integer part
// of 1 / x^|e| as PyTorch: 1 for x = 1, +-1 for x = -1, 0 otherwise (x = 0 gives 0 too: the
// zero-division error is PyTorch's for scalars only).
template <typename C>
DT_HOST_DEVICE inline C pow_op(C x, C e) {
  if constexpr (std::is_floating_point_v<C>) {
    using std::pow;  // float overloads on the host; CUDA's on the device
    return pow(x, e);
  } else if constexpr (std::is_same_v<C, bool>) {
    return x || !e;
  } else {
    if (e >= 0) return int_pow(x, static_cast<int64_t>(e));
    if (x == 1) return C(1);
    if constexpr (std::is_signed_v<C>) {
      if (x == -1) return (e & 1) ? C(-1) : C(1);
    }
    return C(0);
  }
}

// C's fmod: the remainder of truncated division, with the sign of x. Integers by % (the
// callers refuse a zero divisor before any kernel runs).
template <typename C>
DT_HOST_DEVICE inline C fmod_op(C x, C y) {
  if constexpr (std::is_floating_point_v<C>) {
    using std::fmod;
    return fmod(x, y);
  } else {
    // y == -1 is answered directly: INT_MIN % -1 overflows (a trap on x86).
    if (y == 0) return C(0);
    if constexpr (std::is_signed_v<C>) {
      if (y == C(-1)) return C(0);
    }
    return static_cast<C>(x % y);
  }
}

// atan2(y, x) and sqrt(x^2 + y^2) without overflow (floating C only).
template <typename C>
DT_HOST_DEVICE inline C atan2_op(C y, C x) {
  using std::atan2;
  return atan2(y, x);
}
template <typename C>
DT_HOST_DEVICE inline C hypot_op(C x, C y) {
  using std::hypot;
  return hypot(x, y);
}

// Python's modulus: the remainder of floored division, with the sign of y.
template <typename C>
DT_HOST_DEVICE inline C remainder_op(C x, C y) {
  if constexpr (std::is_floating_point_v<C>) {
    using std::fmod;
    C r = fmod(x, y);
    if (r != C(0) && ((r < C(0)) != (y < C(0)))) r += y;
    return r;
  } else {
    if (y == 0) return C(0);
    if constexpr (std::is_signed_v<C>) {
      if (y == C(-1)) return C(0);  // as fmod_op
    }
    C r = static_cast<C>(x % y);
    if constexpr (std::is_signed_v<C>) {
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
    }
    return r;
  }
}

// x with NaN, +inf and -inf replaced (floating C only).
template <typename C>
DT_HOST_DEVICE inline C nan_to_num_op(C x, C nan, C posinf, C neginf) {
  if (x != x) return nan;
  if (x == C(INFINITY)) return posinf;
  if (x == C(-INFINITY)) return neginf;
  return x;
}

}  // namespace dtensor::detail
