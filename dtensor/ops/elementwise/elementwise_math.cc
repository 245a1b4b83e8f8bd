// Public pointwise math beyond the arithmetic of elementwise.cc: square, pow with a tensor
// exponent, fmod / remainder, atan2 / hypot, logaddexp / xlogy / copysign, clamp, nan_to_num,
// the float predicates, logical and bitwise ops, lerp, addcmul / addcdiv. Ops with a kernel of
// their own run it through elementwise_impl.h; the others are short compositions of existing
// kernels (noted per op), so their CUDA half is the kernels they compose.
#include <absl/strings/str_format.h>

#include <cmath>
#include <string>
#include <string_view>

#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/detail/elementwise_cuda.h"
#include "dtensor/ops/elementwise/detail/elementwise_impl.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {

namespace {

using detail::BinaryOp;
using detail::UnaryOp;

void check_dtype(bool ok, std::string_view op, std::string_view arg, DType d,
                 std::string_view expected) {
  DT_CHECK(ok, "[%s] argument %s has dtype %s, expected %s", op, arg, dtype_name(d), expected);
}

bool is_integral_or_bool(DType d) {
  return !is_floating(d);
}

Tensor mod_op(std::string_view op, BinaryOp kind, const Tensor& self, const Tensor& other) {
  detail::check_binary_args(op, self, other);
  const DType dt = result_type(self, other);
  check_dtype(dt != DType::kBool, op, "self", dt, "a number type (bool is not supported)");
  const std::string err = detail::integer_division_error(op, other, dt);
  DT_CHECK(err.empty(), "%s", err);
  return detail::binary_op(op, kind, self, other, dt);
}

Tensor mod_scalar_op(std::string_view op, BinaryOp kind, const Tensor& self, const Scalar& other) {
  detail::check_defined(op, self, "self");
  const DType dt = result_type(self, other);
  check_dtype(dt != DType::kBool, op, "self", dt, "a number type (bool is not supported)");
  DT_CHECK(is_floating(dt) || other.to_int() != 0, "[%s] integer division by zero (argument other)",
           op);
  return detail::binary_scalar_op(kind, self, other, dt);
}

// op(self, other) in their promoted dtype, which must pass `ok` (the error names `expected`).
Tensor checked_binary(std::string_view op, BinaryOp kind, const Tensor& self, const Tensor& other,
                      bool (*ok)(DType), std::string_view expected) {
  detail::check_binary_args(op, self, other);
  const DType dt = result_type(self, other);
  check_dtype(ok(dt), op, "self", dt, expected);
  return detail::binary_op(op, kind, self, other, dt);
}

Tensor bitwise(std::string_view op, BinaryOp kind, const Tensor& self, const Tensor& other) {
  return checked_binary(op, kind, self, other, is_integral_or_bool, "an integer or bool dtype");
}

// op(self, other) computed in a floating dtype: integer and bool inputs promote to float32.
Tensor floating_binary(std::string_view op, BinaryOp kind, const Tensor& self,
                       const Tensor& other) {
  detail::check_binary_args(op, self, other);
  return detail::binary_op(op, kind, self, other, floating_result_type(result_type(self, other)));
}

}  // namespace

namespace detail {

// Integer fmod / remainder by zero raise, as PyTorch's ZeroDivisionError. Counted on the
// divisor's device, so it works for CUDA tensors too.
std::string integer_division_error(std::string_view op, const Tensor& other, DType dt) {
  if (is_floating(dt) || other.numel() == 0) return {};
  const int64_t zeros =
      sum(eq(other, Scalar(int64_t{0})).to(kInt64)).to(Device(kCPU)).item<int64_t>();
  if (zeros == 0) return {};
  return absl::StrFormat("[%s] integer division by zero (%d zero elements in argument other)", op,
                         zeros);
}

}  // namespace detail

Tensor square(const Tensor& x) {
  detail::check_defined("square", x, "self");
  if (x.dtype() == DType::kBool) return x.to(DType::kInt64);  // PyTorch: pow(bool, 2) is int64
  return detail::unary_op(UnaryOp::kPow, x, x.dtype(), Scalar(int64_t{2}));
}

Tensor pow(const Tensor& x, const Tensor& exponent) {
  detail::check_binary_args("pow", x, exponent);
  return detail::binary_op("pow", BinaryOp::kPow, x, exponent, result_type(x, exponent));
}

Tensor fmod(const Tensor& self, const Tensor& other) {
  return mod_op("fmod", BinaryOp::kFmod, self, other);
}
Tensor fmod(const Tensor& self, const Scalar& other) {
  return mod_scalar_op("fmod", BinaryOp::kFmod, self, other);
}
Tensor remainder(const Tensor& self, const Tensor& other) {
  return mod_op("remainder", BinaryOp::kRemainder, self, other);
}
Tensor remainder(const Tensor& self, const Scalar& other) {
  return mod_scalar_op("remainder", BinaryOp::kRemainder, self, other);
}

Tensor atan2(const Tensor& self, const Tensor& other) {
  return floating_binary("atan2", BinaryOp::kAtan2, self, other);
}
Tensor hypot(const Tensor& self, const Tensor& other) {
  return checked_binary("hypot", BinaryOp::kHypot, self, other, is_floating, "a floating dtype");
}

// logaddexp is defined for floating dtypes only: integer inputs raise a dtype error, as in
// PyTorch 2.15 (its CPU kernel rejects int64; pinned by test_activations_torch_mpi). xlogy and
// copysign compute integer and bool inputs in float32.
Tensor logaddexp(const Tensor& self, const Tensor& other) {
  return checked_binary("logaddexp", BinaryOp::kLogaddexp, self, other, is_floating,
                        "a floating dtype");
}
Tensor xlogy(const Tensor& self, const Tensor& other) {
  return floating_binary("xlogy", BinaryOp::kXlogy, self, other);
}
Tensor copysign(const Tensor& self, const Tensor& other) {
  return floating_binary("copysign", BinaryOp::kCopysign, self, other);
}

// One allocation: max into a new tensor, then min in place (kernels allow exact aliasing).
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  detail::check_defined("clamp", x, "self");
  DT_CHECK(min || max, "[clamp] at least one of min and max must be given");
  check_dtype(x.dtype() != DType::kBool, "clamp", "self", x.dtype(), "a number type");
  DType dt = x.dtype();
  if (min) dt = result_type(dt, *min);
  if (max) dt = result_type(dt, *max);
  if (!min) return detail::binary_scalar_op(BinaryOp::kMinimum, x, *max, dt);
  Tensor out = detail::binary_scalar_op(BinaryOp::kMaximum, x, *min, dt);
  if (max) {
    (out.device().is_cuda() ? detail::binary_scalar_cuda : detail::binary_scalar_cpu)(
        BinaryOp::kMinimum, out, out, *max, false);
  }
  return out;
}
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  detail::check_defined("clamp", x, "self");
  detail::check_binary_args("clamp", min, max);
  detail::check_same_device("clamp", x, min, "min");
  return minimum(maximum(x, min), max);
}
Tensor clamp_min(const Tensor& x, const Scalar& min) {
  return clamp(x, min, std::nullopt);
}
Tensor clamp_max(const Tensor& x, const Scalar& max) {
  return clamp(x, std::nullopt, max);
}
Tensor clip(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return clamp(x, min, max);
}

Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  detail::check_defined("nan_to_num", x, "self");
  if (!is_floating(x.dtype())) return x.clone();  // nothing to replace, as PyTorch
  const double big = finfo_max(x.dtype());
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype(), x.device()));
  (x.device().is_cuda() ? detail::nan_to_num_cuda : detail::nan_to_num_cpu)(
      out, x, nan, posinf.value_or(big), neginf.value_or(-big));
  return out;
}

// The predicates compare (NaN is the one value unequal to itself; x - x is 0 exactly when x is
// finite); integer and bool tensors hold no NaN or infinity.
namespace {
Tensor all_bool(const Tensor& x, bool value) {
  return full(x.sizes(), Scalar(value), TensorOptions(DType::kBool, x.device()));
}
Tensor predicate(std::string_view op, const Tensor& x, bool non_floating_value) {
  detail::check_defined(op, x, "self");
  return is_floating(x.dtype()) ? Tensor() : all_bool(x, non_floating_value);
}
}  // namespace
Tensor isnan(const Tensor& x) {
  const Tensor r = predicate("isnan", x, false);
  return r.defined() ? r : ne(x, x);
}
Tensor isinf(const Tensor& x) {
  const Tensor r = predicate("isinf", x, false);
  return r.defined() ? r : eq(abs(x), Scalar(INFINITY));
}
Tensor isposinf(const Tensor& x) {
  const Tensor r = predicate("isposinf", x, false);
  return r.defined() ? r : eq(x, Scalar(INFINITY));
}
Tensor isneginf(const Tensor& x) {
  const Tensor r = predicate("isneginf", x, false);
  return r.defined() ? r : eq(x, Scalar(-INFINITY));
}
Tensor isfinite(const Tensor& x) {
  const Tensor r = predicate("isfinite", x, true);
  return r.defined() ? r : eq(x - x, Scalar(0.0));
}

// Logical ops test nonzero (bool mul is and, bool add is or).
Tensor logical_not(const Tensor& x) {
  detail::check_defined("logical_not", x, "self");
  return eq(x, Scalar(int64_t{0}));
}
namespace {
Tensor truth(std::string_view op, const Tensor& x, std::string_view arg) {
  detail::check_defined(op, x, arg);
  return x.dtype() == DType::kBool ? x : ne(x, Scalar(int64_t{0}));
}
}  // namespace
Tensor logical_and(const Tensor& self, const Tensor& other) {
  detail::check_binary_args("logical_and", self, other);
  return mul(truth("logical_and", self, "self"), truth("logical_and", other, "other"));
}
Tensor logical_or(const Tensor& self, const Tensor& other) {
  detail::check_binary_args("logical_or", self, other);
  return add(truth("logical_or", self, "self"), truth("logical_or", other, "other"));
}
Tensor logical_xor(const Tensor& self, const Tensor& other) {
  detail::check_binary_args("logical_xor", self, other);
  return ne(truth("logical_xor", self, "self"), truth("logical_xor", other, "other"));
}

Tensor bitwise_and(const Tensor& self, const Tensor& other) {
  return bitwise("bitwise_and", BinaryOp::kBitAnd, self, other);
}
Tensor bitwise_or(const Tensor& self, const Tensor& other) {
  return bitwise("bitwise_or", BinaryOp::kBitOr, self, other);
}
Tensor bitwise_xor(const Tensor& self, const Tensor& other) {
  return bitwise("bitwise_xor", BinaryOp::kBitXor, self, other);
}
Tensor bitwise_not(const Tensor& x) {
  detail::check_defined("bitwise_not", x, "self");
  check_dtype(is_integral_or_bool(x.dtype()), "bitwise_not", "self", x.dtype(),
              "an integer or bool dtype");
  if (x.dtype() == DType::kBool) return logical_not(x);
  return detail::unary_op(UnaryOp::kBitNot, x, x.dtype());
}

Tensor masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value) {
  detail::check_binary_args("masked_fill", self, mask);
  DT_CHECK(mask.dtype() == DType::kBool, "[masked_fill] argument mask has dtype %s, expected bool",
           dtype_name(mask.dtype()));
  const Shape shape = detail::broadcast_pair("masked_fill", self.sizes(), mask.sizes(), "mask");
  DT_CHECK(IntSpan(shape) == IntSpan(self.sizes()),
           "[masked_fill] mask of shape %s does not broadcast to self's shape %s",
           shape_str(mask.sizes()), shape_str(self.sizes()));
  return where(mask, full({}, value, TensorOptions(self.dtype(), self.device())), self);
}

// lerp: floating only (as PyTorch).
namespace {
void check_lerp(const Tensor& start, const Tensor& end) {
  detail::check_binary_args("lerp", start, end);
  check_dtype(is_floating(start.dtype()), "lerp", "self", start.dtype(), "a floating dtype");
  check_dtype(is_floating(end.dtype()), "lerp", "end", end.dtype(), "a floating dtype");
}
}  // namespace
// PyTorch's formula (ATen Lerp.h): start + weight (end - start) for |weight| < 0.5, else
// end - (end - start) (1 - weight), so that weight 1 gives end exactly (start + (end - start)
// loses end when it is small beside start: lerp(1, 1e-20, 1) would be 0) and the same NaN where
// end - start is infinite.
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  check_lerp(start, end);
  const double w = weight.to_double();
  const Tensor diff = end - start;
  return std::abs(w) < 0.5 ? start + diff * weight : end - diff * Scalar(1.0 - w);
}
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  check_lerp(start, end);
  detail::check_binary_args("lerp", start, weight);
  check_dtype(is_floating(weight.dtype()), "lerp", "weight", weight.dtype(), "a floating dtype");
  const Tensor diff = end - start;
  return where(lt(abs(weight), Scalar(0.5)), start + diff * weight,
               end - diff * (Scalar(1.0) - weight));
}

// self + value * t1 * t2 and self + value * t1 / t2 (addcdiv refuses integer division, as
// PyTorch).
Tensor addcmul(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
               const Scalar& value) {
  detail::check_binary_args("addcmul", self, tensor1);
  detail::check_binary_args("addcmul", tensor1, tensor2);
  // As PyTorch, value takes no part in the promotion: on an integer result a floating value is
  // converted to the integer type (truncated: 1.5 counts as 1), not a float32 result.
  const DType type = promote_types(promote_types(self.dtype(), tensor1.dtype()), tensor2.dtype());
  if (!is_floating(type) && value.is_floating()) {
    return self + tensor1 * tensor2 * Scalar(value.to_int());
  }
  return self + tensor1 * tensor2 * value;
}
Tensor addcdiv(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
               const Scalar& value) {
  detail::check_binary_args("addcdiv", self, tensor1);
  detail::check_binary_args("addcdiv", tensor1, tensor2);
  DT_CHECK(is_floating(tensor1.dtype()) || is_floating(tensor2.dtype()),
           "[addcdiv] integer division of tensor1 (%s) by tensor2 (%s) is not supported (use "
           "a floating dtype)",
           dtype_name(tensor1.dtype()), dtype_name(tensor2.dtype()));
  return self + tensor1 / tensor2 * value;
}

}  // namespace dtensor
