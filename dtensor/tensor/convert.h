// Element conversion between the library's dtypes, as copy_ and to(dtype) do it:
// 16-bit floats go through float, bool destinations test for nonzero (NaN is nonzero), bool
// sources give 0 or 1, floating -> integer saturates (below), everything else is a static_cast.
//
// Floating -> integer is defined for every value (a plain static_cast is undefined behaviour
// for NaN, infinities and values out of range): truncation toward zero, NaN -> 0, values at or
// beyond the integer range (infinities included) -> the nearest bound. This is what CUDA (and
// PyTorch on CUDA and on ARM CPUs) gives; PyTorch on x86 CPUs gives INT_MIN instead. The same
// rule on the CPU and CUDA keeps sharded and replicated results identical.
#pragma once

#include <cstdint>
#include <type_traits>

#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/macros.h"

namespace dtensor::detail {

template <typename T>
inline constexpr bool is_reduced_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The value of `s` as element type D.
// Floating `s` as the signed integer type D, saturating (see above).
template <typename D, typename S>
DT_HOST_DEVICE DT_FORCE_INLINE D saturating_cast(S s) {
  constexpr D kMax = static_cast<D>((uint64_t{1} << (8 * sizeof(D) - 1)) - 1);
  constexpr D kMin = static_cast<D>(-kMax - 1);
  // -2^(bits-1) and 2^(bits-1) are exact in float and double; every S strictly between them
  // truncates to a value of D.
  constexpr S kLow = static_cast<S>(kMin);
  constexpr S kHigh = -static_cast<S>(kMin);
  if (!(s == s)) return D(0);
  if (s <= kLow) return kMin;
  if (s >= kHigh) return kMax;
  return static_cast<D>(s);
}

template <typename D, typename S>
DT_HOST_DEVICE DT_FORCE_INLINE D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (is_reduced_float_v<S>) {
    return convert<D>(static_cast<float>(s));
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);
  } else if constexpr (is_reduced_float_v<D>) {
    return D(static_cast<float>(s));
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    return saturating_cast<D>(s);
  } else {
    return static_cast<D>(s);
  }
}

}  // namespace dtensor::detail
