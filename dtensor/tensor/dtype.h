// Element types and the compile-time dispatch over them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

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

// Bytes per element.
constexpr size_t dtype_size(DType d) {
  switch (d) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
  }
  return 0;
}

// "float32", "bfloat16", ... (PyTorch's names).
constexpr std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "?";
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

// The C++ type that stores one element of a DType.
template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = DType::kFloat16;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = DType::kBFloat16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::kBool;
};
template <typename T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

// dispatch_dtype(d, [&]<typename T>() { ... }) calls the lambda with T = the element type.
template <typename F>
decltype(auto) dispatch_dtype(DType d, F&& f) {
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
      return f.template operator()<int32_t>();
    case DType::kInt64:
      return f.template operator()<int64_t>();
    case DType::kBool:
      return f.template operator()<bool>();
  }
  DT_FAIL("[dispatch_dtype] unknown dtype %d", static_cast<int>(d));
}

// Same, restricted to the floating types; other dtypes raise an Error naming `op`.
template <typename F>
decltype(auto) dispatch_floating(DType d, std::string_view op, F&& f) {
  switch (d) {
    case DType::kFloat32:
      return f.template operator()<float>();
    case DType::kFloat64:
      return f.template operator()<double>();
    case DType::kFloat16:
      return f.template operator()<Half>();
    case DType::kBFloat16:
      return f.template operator()<BFloat16>();
    default:
      break;
  }
  DT_FAIL("[%s] expected a floating dtype (float32, float64, float16, bfloat16), got %s", op,
          dtype_name(d));
}

}  // namespace dtensor
