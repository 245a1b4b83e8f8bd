// Element conversion between the library's dtypes, as copy_ and to(dtype) do it:
// 16-bit floats go through float, bool destinations test for nonzero (NaN is nonzero), bool
// sources give 0 or 1, everything else is a static_cast.
#pragma once

#include <type_traits>

#include "tensor/dtype.h"
#include "tensor/macros.h"

namespace dtensor::detail {

template <typename T>
inline constexpr bool is_reduced_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The value of `s` as element type D.
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
  } else {
    return static_cast<D>(s);
  }
}

}  // namespace dtensor::detail
