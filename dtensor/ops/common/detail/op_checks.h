// Argument checks shared by every op family.
#pragma once

#include <string_view>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// Throws "[op] argument <arg> is an undefined tensor" when t is undefined.
void check_defined(std::string_view op, const Tensor& t, std::string_view arg);

// Throws when `other` lives on a different device than `self`, naming the argument.
void check_same_device(std::string_view op, const Tensor& self, const Tensor& other,
                       std::string_view arg);

// NumPy broadcasting of a with b; on mismatch throws
// "[op] cannot broadcast shapes [2, 3] and [4] (argument <arg>)".
Shape broadcast_pair(std::string_view op, IntSpan a, IntSpan b, std::string_view arg);

}  // namespace dtensor::detail
