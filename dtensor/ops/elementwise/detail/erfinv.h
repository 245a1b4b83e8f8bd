// The inverse error function on the host. Written here because neither libm nor the libraries
// this project uses (Highway, SLEEF) has one; CUDA kernels call the CUDA math library's erfinv.
// M. Giles' single-precision approximation ("Approximating the erfinv function", GPU
// Computing Gems Jade Edition, 2011: two polynomials in w = -log(1 - x^2)), then Newton steps
// on erf(y) = x in the compute type, which take float64 to within a few ulp (PyTorch's CPU
// kernel also refines a rational approximation with two Newton steps).
#pragma once

#include <cmath>
#include <limits>

namespace dtensor::detail {

// erfinv(x) for float or double: +-inf at +-1, NaN outside [-1, 1] and for NaN.
template <typename C>
C erfinv_host(C x) {
  if (!(x >= C(-1) && x <= C(1))) return std::numeric_limits<C>::quiet_NaN();
  if (x == C(1) || x == C(-1)) return std::copysign(std::numeric_limits<C>::infinity(), x);
  // w in the compute type: in float, an x within 6e-8 of +-1 would round to +-1.
  float w = static_cast<float>(-std::log((C(1) - x) * (C(1) + x)));
  float p;
  if (w < 5.0f) {
    w -= 2.5f;
    p = 2.81022636e-08f;
    p = 3.43273939e-07f + p * w;
    p = -3.5233877e-06f + p * w;
    p = -4.39150654e-06f + p * w;
    p = 0.00021858087f + p * w;
    p = -0.00125372503f + p * w;
    p = -0.00417768164f + p * w;
    p = 0.246640727f + p * w;
    p = 1.50140941f + p * w;
  } else {
    w = std::sqrt(w) - 3.0f;
    p = -0.000200214257f;
    p = 0.000100950558f + p * w;
    p = 0.00134934322f + p * w;
    p = -0.00367342844f + p * w;
    p = 0.00573950773f + p * w;
    p = -0.0076224613f + p * w;
    p = 0.00943887047f + p * w;
    p = 1.00167406f + p * w;
    p = 2.83297682f + p * w;
  }
  C y = static_cast<C>(p) * x;
  // erf'(y) = 2 / sqrt(pi) exp(-y^2).
  const C two_over_sqrt_pi = C(1.12837916709551257390);
  // Two steps suffice inside the approximation's design range (|x| < 1 - 6e-8); closer to
  // +-1 (double only) the start is an extrapolation and takes up to two more.
  for (int i = 0; i < 4; ++i) {
    const C slope = two_over_sqrt_pi * std::exp(-y * y);
    if (slope == C(0)) break;  // |y| so large that erf is flat: keep the approximation
    const C step = (std::erf(y) - x) / slope;
    y -= step;
    if (i >= 1 && std::fabs(step) <= std::numeric_limits<C>::epsilon() * std::fabs(y)) break;
  }
  return y;
}

}  // namespace dtensor::detail
