// Shared steps of the public elementwise functions (elementwise.cc, elementwise_math.cc):
// allocate the output, convert the operands to the compute dtype, run the device's kernel.
// Callers check their arguments and choose the dtype first.
#pragma once

#include <string>
#include <string_view>

#include "dtensor/ops/elementwise/detail/elementwise_kernels.h"

namespace dtensor::detail {

// Both defined, on one device; errors name `op` and the argument.
void check_binary_args(std::string_view op, const Tensor& self, const Tensor& other);
// out[broadcast shape] (dtype dt) = self kind other, both converted to dt.
Tensor binary_op(std::string_view op, BinaryOp kind, const Tensor& self, const Tensor& other,
                 DType dt);
// out (dtype dt) = self kind s (s kind self when scalar_first), self converted to dt.
Tensor binary_scalar_op(BinaryOp kind, const Tensor& self, const Scalar& s, DType dt,
                        bool scalar_first = false);
// out (dtype dt) = kind(x converted to dt); param: pow's exponent.
Tensor unary_op(UnaryOp kind, const Tensor& x, DType dt, const Scalar& param = Scalar());

// "" when integer fmod / remainder in dtype dt may divide by `other`, else the error naming
// `op` and the count of zero divisors (floating dt: always "", division by zero is NaN).
std::string integer_division_error(std::string_view op, const Tensor& other, DType dt);

}  // namespace dtensor::detail
