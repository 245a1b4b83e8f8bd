// x ** e for integers by repeated squaring (e >= 0; wraps on overflow like PyTorch's integer
// math), shared by the CPU and CUDA kernels so both round and wrap alike.
#pragma once

#include <cstdint>
#include <type_traits>

#include "dtensor/tensor/macros.h"

namespace dtensor::detail {

template <typename C>
DT_HOST_DEVICE inline C int_pow(C x, int64_t e) {
  using U = std::make_unsigned_t<C>;
  U result = 1;
  U base = static_cast<U>(x);
  while (e > 0) {
    if (e & 1) result *= base;
    base *= base;
    e >>= 1;
  }
  return static_cast<C>(result);
}

}  // namespace dtensor::detail
