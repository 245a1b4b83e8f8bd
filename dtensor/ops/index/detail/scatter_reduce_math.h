// The element rules of scatter_reduce, written once for the CPU kernel (index_cpu.cc) and the
// CUDA kernel (index_cuda.cu, inside its atomic compare-and-swap loops), so both devices combine
// and average alike: integer sums and products wrap (two's complement, no signed overflow),
// amax / amin let a NaN newcomer win and keep a NaN already there, and an integer mean rounds
// down as PyTorch's (floor division).
#pragma once

#include <cstdint>
#include <type_traits>

#include "dtensor/tensor/macros.h"

namespace dtensor::detail {

struct ScatterCombineSum {
  template <typename T>
  DT_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

struct ScatterCombineProd {
  template <typename T>
  DT_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};

// b != b: NaN (always false for integers).
struct ScatterCombineMax {
  template <typename T>
  DT_HOST_DEVICE T operator()(T a, T b) const {
    return b != b || a < b ? b : a;
  }
};

struct ScatterCombineMin {
  template <typename T>
  DT_HOST_DEVICE T operator()(T a, T b) const {
    return b != b || b < a ? b : a;
  }
};

// A position's mean: its reduced sum over `count` (> 0) values.
template <typename T>
DT_HOST_DEVICE T scatter_mean(T sum, int64_t count) {
  if constexpr (std::is_integral_v<T>) {
    const int64_t a = static_cast<int64_t>(sum);
    return static_cast<T>(a / count - (a % count != 0 && a < 0 ? 1 : 0));
  } else {
    return sum / static_cast<T>(count);
  }
}

}  // namespace dtensor::detail
