// Helpers shared by the collectives test suites: typed fills and reads of CPU tensors and
// element conversions through double, so expectations can be computed by plain loops.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::test {

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// Value `v` as it round-trips through T (what a tensor of T can hold).
template <typename T>
double representable(double v) {
  return to_double(from_double<T>(v));
}

// A 1-d CPU tensor of T with element i = f(i) (converted to T).
template <typename T>
Tensor make_tensor(int64_t n, const std::function<double(int64_t)>& f) {
  Tensor t = empty({n}, TensorOptions(dtype_of_v<T>));
  T* p = n > 0 ? t.data<T>() : nullptr;
  for (int64_t i = 0; i < n; ++i) p[i] = from_double<T>(f(i));
  return t;
}

template <typename T>
double element(const Tensor& t, int64_t i) {
  return to_double(t.data<T>()[i]);
}

template <typename T>
constexpr bool is_float16_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Exact for integers and bool; relative tolerance for floating types.
template <typename T>
bool close(double got, double expected) {
  if constexpr (std::is_floating_point_v<T> || is_float16_v<T>) {
    const double tol = is_float16_v<T> ? 1e-2 : 1e-6;
    return std::abs(got - expected) <= tol * std::max(1.0, std::abs(expected));
  } else {
    return got == expected;
  }
}

}  // namespace dtensor::test
