// torch.promote_types over DTypes: the dtype two tensors of different dtypes meet at (local
// cat / stack use it; the ops' fuller rules, with Scalars and 0-d tensors, are in
// dtensor/ops/common/detail/type_promotion.h).
//
// Dtypes fall in three categories, bool < integer < floating. Two dtypes promote to the wider
// type of the higher category: int32 + int64 -> int64, int64 + float16 -> float16, bool + int32
// -> int32, float16 + bfloat16 -> float32.
#pragma once

#include <cstdint>

#include "dtensor/tensor/dtype.h"

namespace dtensor {

enum class DTypeCategory : uint8_t { kBool = 0, kInteger = 1, kFloating = 2 };

constexpr DTypeCategory dtype_category(DType d) {
  if (d == DType::kBool) return DTypeCategory::kBool;
  if (is_floating(d)) return DTypeCategory::kFloating;
  return DTypeCategory::kInteger;
}

// The smallest dtype both a and b convert to (torch.promote_types); symmetric.
constexpr DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const DTypeCategory ca = dtype_category(a);
  const DTypeCategory cb = dtype_category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == DTypeCategory::kInteger) return DType::kInt64;  // int32 with int64
  // Two different floating types: float16 and bfloat16 meet at float32, else the wider wins.
  if (is_reduced_float(a) && is_reduced_float(b)) return DType::kFloat32;
  if (is_reduced_float(a) || is_reduced_float(b)) return is_reduced_float(a) ? b : a;
  return a == DType::kFloat64 ? a : b;
}

}  // namespace dtensor
