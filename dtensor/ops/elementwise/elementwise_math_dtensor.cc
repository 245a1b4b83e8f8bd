// DTensor forms of the pointwise math of elementwise_math.cc: each looks its op up once and
// dispatches it (registered in elementwise_strategy.cc). Scalar arguments are resolved here,
// identically on every rank, before dispatch.
#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/detail/elementwise_impl.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor {

#define DT_EW_BINARY(fn, op_name)                         \
  DTensor fn(const DTensor& self, const DTensor& other) { \
    static const OpInfo& info = ops_op(op_name);          \
    return dispatch(info, {&self, &other});               \
  }
#define DT_EW_UNARY(fn)                      \
  DTensor fn(const DTensor& x) {             \
    static const OpInfo& info = ops_op(#fn); \
    return dispatch(info, {&x});             \
  }

// square of bool is int64, as PyTorch's (pow(bool, 2)); the registered op takes numbers only.
DTensor square(const DTensor& x) {
  static const OpInfo& info = ops_op("square");
  if (x.defined() && x.dtype() == kBool) return cast(x, kInt64);
  return dispatch(info, {&x});
}
DT_EW_UNARY(isnan)
DT_EW_UNARY(isinf)
DT_EW_UNARY(isposinf)
DT_EW_UNARY(isneginf)
DT_EW_UNARY(isfinite)
DT_EW_UNARY(logical_not)
DT_EW_UNARY(bitwise_not)
DT_EW_BINARY(pow, "pow.Tensor")
DT_EW_BINARY(fmod, "fmod")
DT_EW_BINARY(remainder, "remainder")
DT_EW_BINARY(atan2, "atan2")
DT_EW_BINARY(hypot, "hypot")
DT_EW_BINARY(logaddexp, "logaddexp")
DT_EW_BINARY(xlogy, "xlogy")
DT_EW_BINARY(copysign, "copysign")
DT_EW_BINARY(logical_and, "logical_and")
DT_EW_BINARY(logical_or, "logical_or")
DT_EW_BINARY(logical_xor, "logical_xor")
DT_EW_BINARY(bitwise_and, "bitwise_and")
DT_EW_BINARY(bitwise_or, "bitwise_or")
DT_EW_BINARY(bitwise_xor, "bitwise_xor")

#undef DT_EW_BINARY
#undef DT_EW_UNARY

namespace {
// fmod / remainder by a scalar: args (scalar [runtime], result dtype [static]).
DTensor mod_scalar(const OpInfo& info, const DTensor& self, const Scalar& other) {
  const DType dt = result_type(self.dtype(), other);
  DT_CHECK(is_floating(dt) || other.to_int() != 0, "[%s] integer division by zero (argument other)",
           info.name);
  const ArgValue args[] = {scalar_arg(other), dt};
  return dispatch(info, {&self}, args);
}
}  // namespace

DTensor fmod(const DTensor& self, const Scalar& other) {
  static const OpInfo& info = ops_op("fmod.Scalar");
  return mod_scalar(info, self, other);
}
DTensor remainder(const DTensor& self, const Scalar& other) {
  static const OpInfo& info = ops_op("remainder.Scalar");
  return mod_scalar(info, self, other);
}

DTensor clamp(const DTensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  DT_CHECK(min || max, "[clamp] at least one of min and max must be given");
  DType dt = x.dtype();
  if (min) dt = result_type(dt, *min);
  if (max) dt = result_type(dt, *max);
  if (min && max) {
    static const OpInfo& info = ops_op("clamp");
    const ArgValue args[] = {scalar_arg(*min), scalar_arg(*max), dt};
    return dispatch(info, {&x}, args);
  }
  static const OpInfo& lower = ops_op("clamp_min");
  static const OpInfo& upper = ops_op("clamp_max");
  const ArgValue args[] = {scalar_arg(min ? *min : *max), dt};
  return dispatch(min ? lower : upper, {&x}, args);
}
DTensor clamp(const DTensor& x, const DTensor& min, const DTensor& max) {
  static const OpInfo& info = ops_op("clamp.Tensor");
  // One bound left out (an undefined DTensor, PyTorch's None): clamp(x, min) is maximum(x, min)
  // and clamp(x, max = max) minimum(x, max), values and gradients alike (ties split, a NaN x
  // passes the gradient to both), as PyTorch's clamp_backward_min_max.
  if (x.defined() && min.defined() != max.defined()) {
    return min.defined() ? maximum(x, min) : minimum(x, max);
  }
  return dispatch(info, {&x, &min, &max});
}
DTensor clamp_min(const DTensor& x, const Scalar& min) {
  return clamp(x, min, std::nullopt);
}
DTensor clamp_max(const DTensor& x, const Scalar& max) {
  return clamp(x, std::nullopt, max);
}
DTensor clip(const DTensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return clamp(x, min, max);
}

DTensor nan_to_num(const DTensor& x, double nan, std::optional<double> posinf,
                   std::optional<double> neginf) {
  static const OpInfo& info = ops_op("nan_to_num");
  const double big = finfo_max(x.dtype());
  const ArgValue args[] = {nan, posinf.value_or(big), neginf.value_or(-big)};
  return dispatch(info, {&x}, args);
}

DTensor masked_fill(const DTensor& self, const DTensor& mask, const Scalar& value) {
  static const OpInfo& info = ops_op("masked_fill");
  const ArgValue args[] = {scalar_arg(value)};
  return dispatch(info, {&self, &mask}, args);
}

DTensor lerp(const DTensor& start, const DTensor& end, const Scalar& weight) {
  static const OpInfo& info = ops_op("lerp.Scalar");
  const ArgValue args[] = {scalar_arg(weight)};
  return dispatch(info, {&start, &end}, args);
}
DTensor lerp(const DTensor& start, const DTensor& end, const DTensor& weight) {
  static const OpInfo& info = ops_op("lerp");
  return dispatch(info, {&start, &end, &weight});
}

DTensor addcmul(const DTensor& self, const DTensor& tensor1, const DTensor& tensor2,
                const Scalar& value) {
  static const OpInfo& info = ops_op("addcmul");
  const ArgValue args[] = {scalar_arg(value)};
  return dispatch(info, {&self, &tensor1, &tensor2}, args);
}
DTensor addcdiv(const DTensor& self, const DTensor& tensor1, const DTensor& tensor2,
                const Scalar& value) {
  static const OpInfo& info = ops_op("addcdiv");
  const ArgValue args[] = {scalar_arg(value)};
  return dispatch(info, {&self, &tensor1, &tensor2}, args);
}

}  // namespace dtensor
