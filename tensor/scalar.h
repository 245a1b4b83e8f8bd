// A number passed to an op (fill value, scalar operand): double, int64 or bool.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

namespace dtensor {

class Scalar {
 public:
  enum class Kind : uint8_t { kDouble, kInt, kBool };

  Scalar() : kind_(Kind::kInt), i_(0) {}
  Scalar(bool b) : kind_(Kind::kBool), i_(b) {}
  template <typename T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  Scalar(T v) : kind_(Kind::kInt), i_(static_cast<int64_t>(v)) {}
  template <typename T>
    requires std::is_floating_point_v<T>
  Scalar(T v) : kind_(Kind::kDouble), d_(static_cast<double>(v)) {}

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::kDouble; }
  double to_double() const { return kind_ == Kind::kDouble ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::kDouble ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::kDouble ? d_ != 0.0 : i_ != 0; }
  // The value as element type T (Half/BFloat16 round from double through float).
  template <typename T> T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_int());
    else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(to_double());
    else return T(static_cast<float>(to_double()));
  }
  std::string str() const;

 private:
  Kind kind_;
  union {
    double d_;
    int64_t i_;
  };
};

}  // namespace dtensor
