// Element types and the compile-time dispatch over them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>
#include <type_traits>

#include "dtensor/tensor/error.h"
#include "dtensor/tensor/half.h"

namespace dtensor {

enum class DType : uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool };

inline constexpr DType kFloat32 = DType::kFloat32;
inline constexpr DType kFloat64 = DType::kFloat64;
inline constexpr DType kFloat16 = DType::kFloat16;
inline constexpr DType kBFloat16 = DType::kBFloat16;
inline constexpr DType kInt32 = DType::kInt32;
inline constexpr DType kInt64 = DType::kInt64;
inline constexpr DType kBool = DType::kBool;
inline constexpr int kNumDTypes = 7;

namespace detail {
// Bytes per element and PyTorch's name, one row per DType in the enum's order.
struct DTypeInfo {
  size_t size;
  std::string_view name;
};
inline constexpr DTypeInfo kDTypeInfo[] = {{4, "float32"},  {8, "float64"}, {2, "float16"},
                                           {2, "bfloat16"}, {4, "int32"},   {8, "int64"},
                                           {1, "bool"}};
static_assert(std::size(kDTypeInfo) == kNumDTypes, "one kDTypeInfo row per DType");
}  // namespace detail

// Bytes per element; 0 for a value outside the enum.
constexpr size_t dtype_size(DType d) {
  const auto i = static_cast<size_t>(d);
  return i < kNumDTypes ? detail::kDTypeInfo[i].size : 0;
}

// "float32", "bfloat16", ... (PyTorch's names); "?" for a value outside the enum.
constexpr std::string_view dtype_name(DType d) {
  const auto i = static_cast<size_t>(d);
  return i < kNumDTypes ? detail::kDTypeInfo[i].name : "?";
}

constexpr bool is_floating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 ||
         d == DType::kBFloat16;
}
constexpr bool is_reduced_float(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16;
}

// The largest finite value of a floating dtype (torch.finfo(d).max); 0 for other dtypes.
constexpr double finfo_max(DType d) {
  switch (d) {
    case DType::kFloat64:
      return 1.7976931348623157e308;
    case DType::kFloat32:
      return 3.4028234663852886e38;
    case DType::kFloat16:
      return 65504.0;
    case DType::kBFloat16:
      return 3.3895313892515355e38;
    default:
      return 0.0;
  }
}

namespace detail {
// The C++ type that stores one element of each DType, in the enum's order.
template <typename... Ts>
struct ElementTypes {
  // The DType whose element type is T (the position of T in the list).
  template <typename T>
  static constexpr DType dtype_of() {
    static_assert((std::is_same_v<T, Ts> || ...), "dtype_of<T>: T is not a dtensor element type");
    constexpr bool is_t[] = {std::is_same_v<T, Ts>...};
    size_t i = 0;
    while (!is_t[i]) ++i;
    return static_cast<DType>(i);
  }
};
using DTypeElements = ElementTypes<float, double, Half, BFloat16, int32_t, int64_t, bool>;
}  // namespace detail

// The DType that stores elements of the C++ type T (dtype_of<float>::value == kFloat32).
template <typename T>
struct dtype_of {
  static constexpr DType value = detail::DTypeElements::dtype_of<T>();
};
template <typename T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

namespace detail {
// The one switch behind dispatch_dtype (kAll; `op` unused) and dispatch_floating (not kAll: the
// integer and bool cases are left out, so f need not compile for them, and raise naming `op`).
// One jump table either way: a second switch for the floating cases cost 5 instructions a call.
template <bool kAll, typename F>
decltype(auto) dispatch_element_type(DType d, std::string_view op, F& f) {
  switch (d) {
    case DType::kFloat32:
      return f.template operator()<float>();
    case DType::kFloat64:
      return f.template operator()<double>();
    case DType::kFloat16:
      return f.template operator()<Half>();
    case DType::kBFloat16:
      return f.template operator()<BFloat16>();
    case DType::kInt32:
      if constexpr (kAll) return f.template operator()<int32_t>();
      break;
    case DType::kInt64:
      if constexpr (kAll) return f.template operator()<int64_t>();
      break;
    case DType::kBool:
      if constexpr (kAll) return f.template operator()<bool>();
      break;
  }
  if constexpr (kAll) {
    DT_FAIL("[dispatch_dtype] unknown dtype %d", static_cast<int>(d));
  } else {
    DT_FAIL("[%s] expected a floating dtype (float32, float64, float16, bfloat16), got %s", op,
            dtype_name(d));
  }
}
}  // namespace detail

// dispatch_dtype(d, [&]<typename T>() { ... }) calls the lambda with T = the element type.
template <typename F>
decltype(auto) dispatch_dtype(DType d, F&& f) {
  return detail::dispatch_element_type<true>(d, {}, f);
}

// Same, restricted to the floating types; other dtypes raise an Error naming `op`.
template <typename F>
decltype(auto) dispatch_floating(DType d, std::string_view op, F&& f) {
  return detail::dispatch_element_type<false>(d, op, f);
}

}  // namespace dtensor
