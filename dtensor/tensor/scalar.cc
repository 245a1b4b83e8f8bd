#include "dtensor/tensor/scalar.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include <climits>
#include <cmath>

namespace dtensor {

std::string Scalar::str() const {
  switch (kind_) {
    case Kind::kBool:
      return i_ ? "true" : "false";
    case Kind::kInt:
      return absl::StrCat(i_);
    case Kind::kDouble:
      return absl::StrFormat("%g", d_);
  }
  return "?";
}

bool scalar_fits(const Scalar& value, DType dtype) {
  if (dtype == DType::kBool) return true;
  if (value.kind() != Scalar::Kind::kDouble) {
    const int64_t v = value.to_int();
    if (dtype == DType::kInt32) return v >= INT32_MIN && v <= INT32_MAX;
    return true;  // int64 holds it; floating dtypes round it
  }
  const double d = value.to_double();
  if (is_floating(dtype)) {
    if (!std::isfinite(d)) return true;
    return std::fabs(d) <= finfo_max(dtype);
  }
  if (!std::isfinite(d)) return false;
  // Within the integer range after truncation toward zero.
  return dtype == DType::kInt32 ? (d > -2147483649.0 && d < 2147483648.0)
                                : (d >= -9223372036854775808.0 && d < 9223372036854775808.0);
}

}  // namespace dtensor
