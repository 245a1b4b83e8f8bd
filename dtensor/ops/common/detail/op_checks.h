// Argument checks shared by every op family.
#pragma once

#include <string_view>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// Throws "[op] argument <arg> is an undefined tensor" when t is undefined.
void check_defined(std::string_view op, const Tensor& t, std::string_view arg);

// Throws as check_defined does, then "[op] expected a floating input, got int64 (argument <arg>:
// float32, float64, float16 or bfloat16)" unless t has a floating dtype: ops that have no
// integer meaning (mean, gelu, max_pool2d) ask the caller to cast.
void check_floating_input(std::string_view op, const Tensor& t, std::string_view arg = "self");

// The same dtype check on a dtype alone (the DTensor ops' meta functions, which see specs).
void check_floating_dtype(std::string_view op, DType dtype, std::string_view arg = "self");

// Throws "[op] argument <arg> has dtype float32, expected int64 or int32" unless dtype is an
// index dtype (gather / scatter indices, class-index targets).
void check_index_dtype(std::string_view op, DType dtype, std::string_view arg);

// Throws when `other` lives on a different device than `self`, naming the argument.
void check_same_device(std::string_view op, const Tensor& self, const Tensor& other,
                       std::string_view arg);

// NumPy broadcasting of a with b; on mismatch throws
// "[op] cannot broadcast shapes [2, 3] and [4] (argument <arg>)".
Shape broadcast_pair(std::string_view op, IntSpan a, IntSpan b, std::string_view arg);

}  // namespace dtensor::detail
