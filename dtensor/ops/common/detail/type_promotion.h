// PyTorch's type promotion, for ops that combine operands of different dtypes.
//
// Dtypes fall in three categories, bool < integer < floating. Two tensors promote to the
// wider type of the higher category (int32 + int64 -> int64, int64 + float16 -> float16,
// float16 + bfloat16 -> float32). A Scalar, or a 0-d tensor next to a tensor with dims, only
// changes the result when its category is higher: a floating Scalar on an integer tensor gives
// float32 (the default float dtype), an integer Scalar on a bool tensor gives int64, and
// float32 tensor * 2.0 stays float32.
#pragma once

#include <cstdint>

#include "dtensor/tensor/promote_types.h"  // DTypeCategory, dtype_category, promote_types
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// The dtype of PyTorch's default floats (torch.get_default_dtype()).
inline constexpr DType kDefaultFloatDType = DType::kFloat32;

// The dtype of an op on tensors a and b (torch.result_type), with the 0-d rule above; the
// first form takes the dtypes and ranks alone (sharding propagation has no tensors).
DType result_type(DType a, int64_t a_ndim, DType b, int64_t b_ndim);
DType result_type(const Tensor& a, const Tensor& b);

// The dtype of an op on tensor t and Scalar s (torch.result_type(t, s)).
DType result_type(const Tensor& t, const Scalar& s);
DType result_type(DType t, const Scalar& s);

// The dtype true division and float-only math (exp, log, ...) compute in: d itself when it is
// floating, float32 for integer and bool dtypes.
constexpr DType floating_result_type(DType d) {
  return is_floating(d) ? d : kDefaultFloatDType;
}

// Whether a result of dtype `from` may be written into an output of dtype `to` (in-place ops):
// true unless `from` is of a higher category (torch.can_cast).
constexpr bool can_cast(DType from, DType to) {
  return static_cast<int>(dtype_category(from)) <= static_cast<int>(dtype_category(to));
}

}  // namespace dtensor
