// Per-element formulas of the binary math ops (pow with a tensor exponent, fmod, remainder,
// atan2, hypot, logaddexp, xlogy, copysign), nan_to_num, the relu6 of the hard activations and
// the activations with parameters (softplus, elu / celu, leaky_relu) and glu's gate, shared by
// the CPU and CUDA kernels so both give the same values (the formulas follow PyTorch's CPU
// kernels). C is the compute type: float or double for
// floating dtypes (16-bit ones computed in float), the integer type itself otherwise.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "dtensor/ops/elementwise/detail/int_pow.h"
#include "dtensor/tensor/macros.h"

namespace dtensor::detail {

// min(max(x, 0), 6) with NaN passing through (fmin / fmax would drop it), for relu6 (integers
// too), hardsigmoid and hardswish on both devices.
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

// log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)); two equal infinities give themselves
// (logaddexp(-inf, -inf) = -inf, where the formula would give NaN); NaN stays NaN.
template <typename C>
DT_HOST_DEVICE inline C logaddexp_op(C a, C b) {
  using std::exp;
  using std::fabs;
  using std::log1p;
  if (a == b && (a == C(INFINITY) || a == C(-INFINITY))) return a;
  const C m = a > b ? a : b;  // a NaN in either makes |a - b| NaN below
  return m + log1p(exp(-fabs(a - b)));
}

// x * log(y), 0 where x == 0 unless y is NaN (xlogy(0, nan) = nan, xlogy(0, 0) = 0).
template <typename C>
DT_HOST_DEVICE inline C xlogy_op(C x, C y) {
  using std::log;
  if (y != y) return y;
  if (x == C(0)) return C(0);
  return x * log(y);
}

// |x| with the sign bit of y (-0.0 and a NaN's sign bit count).
template <typename C>
DT_HOST_DEVICE inline C copysign_op(C x, C y) {
  using std::copysign;
  return copysign(x, y);
}

// a * sigmoid(b), written as PyTorch's glu kernel: a * (1 / (1 + exp(-b))).
template <typename C>
DT_HOST_DEVICE inline C sigmoid_gate_op(C a, C b) {
  using std::exp;
  return a * (C(1) / (C(1) + exp(-b)));
}

// softplus: x where beta x > threshold, else log1p(exp(beta x)) / beta (NaN stays NaN).
template <typename C>
DT_HOST_DEVICE inline C softplus_op(C x, C beta, C threshold) {
  using std::exp;
  using std::log1p;
  const C bx = x * beta;
  return bx > threshold ? x : log1p(exp(bx)) / beta;
}

// elu with PyTorch's input_scale (1 for elu, 1 / alpha for celu): x for x > 0 (and NaN),
// alpha * expm1(x * input_scale) for x <= 0 (-0.0 stays -0.0).
template <typename C>
DT_HOST_DEVICE inline C elu_op(C x, C alpha, C input_scale) {
  using std::expm1;
  return x <= C(0) ? expm1(x * input_scale) * alpha : x;
}

// leaky_relu: x for x > 0, x * negative_slope otherwise (NaN stays NaN, -0.0 stays -0.0).
template <typename C>
DT_HOST_DEVICE inline C leaky_relu_op(C x, C slope) {
  return x > C(0) ? x : x * slope;
}

}  // namespace dtensor::detail
