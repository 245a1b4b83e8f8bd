// A number passed to an op (fill value, scalar operand): double, int64 or bool.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "dtensor/tensor/dtype.h"

namespace dtensor {

class Scalar {
 public:
  enum class Kind : uint8_t { kDouble, kInt, kBool };

  Scalar() : kind_(Kind::kInt), i_(0) {}
  Scalar(bool b) : kind_(Kind::kBool), i_(b) {}
  template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) Scalar(T v)
      : kind_(Kind::kInt), i_(static_cast<int64_t>(v)) {}
  template <typename T>
  requires std::is_floating_point_v<T> Scalar(T v)
      : kind_(Kind::kDouble), d_(static_cast<double>(v)) {}

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::kDouble; }
  double to_double() const { return kind_ == Kind::kDouble ? d_ : static_cast<double>(i_); }
  // A double truncates toward zero; NaN gives 0 and values beyond int64 the nearest bound (a
  // plain cast would be undefined behaviour). fill_/full refuse such values for integer dtypes.
  int64_t to_int() const { return kind_ == Kind::kDouble ? double_to_int(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::kDouble ? d_ != 0.0 : i_ != 0; }
  // The value as element type T (Half/BFloat16 round from double through float).
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return to_bool();
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(to_int());
    else if constexpr (std::is_floating_point_v<T>)
      return static_cast<T>(to_double());
    else
      return T(static_cast<float>(to_double()));
  }
  std::string str() const;

 private:
  static int64_t double_to_int(double d) {
    if (!(d == d)) return 0;
    if (d <= -9223372036854775808.0) return INT64_MIN;
    if (d >= 9223372036854775808.0) return INT64_MAX;
    return static_cast<int64_t>(d);
  }

  Kind kind_;
  union {
    double d_;
    int64_t i_;
  };
};

// Whether `value` converts to `dtype` without overflow (PyTorch's rule for fill_ and full,
// c10::overflows): NaN and infinities only into floating dtypes; finite values within the
// dtype's range (integers within [min, max], doubles within the float32/float16/bfloat16
// maximum); any value into bool.
bool scalar_fits(const Scalar& value, DType dtype);

}  // namespace dtensor
