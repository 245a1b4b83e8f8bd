#include "tensor/scalar.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

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

}  // namespace dtensor
