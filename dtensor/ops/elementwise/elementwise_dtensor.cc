// DTensor forms of the elementwise ops: each looks its op up once and dispatches it (the
// kernels are registered in elementwise_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor {
namespace {

// Dispatches a tensor-scalar op: args (scalar [runtime], result dtype [static]).
DTensor scalar_op(const OpInfo& info, const DTensor& x, const Scalar& s, DType out) {
  const ArgValue args[] = {scalar_arg(s), out};
  return dispatch(info, {&x}, args);
}

// An activation with one parameter (elu's alpha, leaky_relu's slope): args (parameter
// [runtime]).
DTensor with_parameter(const OpInfo& info, const DTensor& x, double parameter) {
  const ArgValue args[] = {scalar_arg(Scalar(parameter))};
  return dispatch(info, {&x}, args);
}

}  // namespace

#define DT_EW_BINARY(fn)                                  \
  DTensor fn(const DTensor& self, const DTensor& other) { \
    static const OpInfo& info = ops_op(#fn);              \
    return dispatch(info, {&self, &other});               \
  }

#define DT_EW_UNARY(fn)                      \
  DTensor fn(const DTensor& x) {             \
    static const OpInfo& info = ops_op(#fn); \
    return dispatch(info, {&x});             \
  }

// Scalar forms whose dtype is result_type(x, s) (floating for div).
#define DT_EW_SCALAR(fn, dtype_expr)                     \
  DTensor fn(const DTensor& self, const Scalar& other) { \
    static const OpInfo& info = ops_op(#fn ".Scalar");   \
    return scalar_op(info, self, other, dtype_expr);     \
  }

#define DT_EW_INPLACE(fn)                                        \
  const DTensor& fn(const DTensor& self, const DTensor& other) { \
    static const OpInfo& info = ops_op(#fn);                     \
    dispatch(info, {&self, &other});                             \
    return self;                                                 \
  }                                                              \
  const DTensor& fn(const DTensor& self, const Scalar& other) {  \
    static const OpInfo& info = ops_op(#fn ".Scalar");           \
    const ArgValue args[] = {scalar_arg(other)};                 \
    dispatch(info, {&self}, args);                               \
    return self;                                                 \
  }

DT_EW_BINARY(add)
DT_EW_BINARY(sub)
DT_EW_BINARY(mul)
DT_EW_BINARY(div)
DT_EW_BINARY(maximum)
DT_EW_BINARY(minimum)
DT_EW_BINARY(eq)
DT_EW_BINARY(ne)
DT_EW_BINARY(lt)
DT_EW_BINARY(le)
DT_EW_BINARY(gt)
DT_EW_BINARY(ge)

DT_EW_SCALAR(add, result_type(self.dtype(), other))
DT_EW_SCALAR(sub, result_type(self.dtype(), other))
DT_EW_SCALAR(mul, result_type(self.dtype(), other))
DT_EW_SCALAR(div, floating_result_type(result_type(self.dtype(), other)))
DT_EW_SCALAR(eq, DType::kBool)
DT_EW_SCALAR(ne, DType::kBool)
DT_EW_SCALAR(lt, DType::kBool)
DT_EW_SCALAR(le, DType::kBool)
DT_EW_SCALAR(gt, DType::kBool)
DT_EW_SCALAR(ge, DType::kBool)

DT_EW_UNARY(neg)
DT_EW_UNARY(abs)
DT_EW_UNARY(exp)
DT_EW_UNARY(log)
DT_EW_UNARY(sqrt)
DT_EW_UNARY(rsqrt)
DT_EW_UNARY(sigmoid)
DT_EW_UNARY(tanh)
DT_EW_UNARY(relu)
DT_EW_UNARY(silu)
DT_EW_UNARY(relu6)
DT_EW_UNARY(sin)
DT_EW_UNARY(cos)
DT_EW_UNARY(tan)
DT_EW_UNARY(erf)
DT_EW_UNARY(erfinv)
DT_EW_UNARY(sinh)
DT_EW_UNARY(cosh)
DT_EW_UNARY(asin)
DT_EW_UNARY(acos)
DT_EW_UNARY(atan)
DT_EW_UNARY(asinh)
DT_EW_UNARY(acosh)
DT_EW_UNARY(atanh)
DT_EW_UNARY(erfc)
DT_EW_UNARY(log_sigmoid)
DT_EW_UNARY(hardsigmoid)
DT_EW_UNARY(hardswish)
DT_EW_UNARY(mish)
DT_EW_UNARY(selu)
DT_EW_UNARY(exp2)
DT_EW_UNARY(expm1)
DT_EW_UNARY(log1p)
DT_EW_UNARY(log2)
DT_EW_UNARY(log10)
DT_EW_UNARY(reciprocal)
DT_EW_UNARY(floor)
DT_EW_UNARY(ceil)
DT_EW_UNARY(round)
DT_EW_UNARY(trunc)
DT_EW_UNARY(frac)
// sign of bool is the bool itself (a copy), as PyTorch's; the registered op takes numbers only.
DTensor sign(const DTensor& x) {
  static const OpInfo& info = ops_op("sign");
  if (x.defined() && x.dtype() == kBool) return x.clone();
  return dispatch(info, {&x});
}

DT_EW_INPLACE(add_)
DT_EW_INPLACE(sub_)
DT_EW_INPLACE(mul_)
DT_EW_INPLACE(div_)

const DTensor& copy_(const DTensor& self, const DTensor& src) {
  static const OpInfo& info = ops_op("copy_");
  dispatch(info, {&self, &src});
  return self;
}

const DTensor& fill_(const DTensor& self, const Scalar& value) {
  static const OpInfo& info = ops_op("fill_.Scalar");
  const ArgValue args[] = {scalar_arg(value)};
  dispatch(info, {&self}, args);
  return self;
}

const DTensor& zero_(const DTensor& self) {
  static const OpInfo& info = ops_op("zero_");
  dispatch(info, {&self});
  return self;
}

DTensor pow(const DTensor& x, const Scalar& exponent) {
  static const OpInfo& info = ops_op("pow");
  return scalar_op(info, x, exponent, result_type(x.dtype(), exponent));
}

DTensor gelu(const DTensor& x, GeluApproximate approximate) {
  static const OpInfo& info = ops_op("gelu");
  const ArgValue args[] = {static_cast<int64_t>(approximate)};
  return dispatch(info, {&x}, args);
}

// The activations with parameters: args (parameters [runtime]); celu's alpha is checked here,
// identically on every rank, before dispatch.
DTensor softplus(const DTensor& x, double beta, double threshold) {
  static const OpInfo& info = ops_op("softplus");
  const ArgValue args[] = {scalar_arg(Scalar(beta)), scalar_arg(Scalar(threshold))};
  return dispatch(info, {&x}, args);
}
DTensor elu(const DTensor& x, double alpha) {
  static const OpInfo& info = ops_op("elu");
  return with_parameter(info, x, alpha);
}
DTensor celu(const DTensor& x, double alpha) {
  DT_CHECK(alpha != 0.0, "[celu] alpha cannot be 0 for CELU");
  static const OpInfo& info = ops_op("celu");
  return with_parameter(info, x, alpha);
}
DTensor leaky_relu(const DTensor& x, double negative_slope) {
  static const OpInfo& info = ops_op("leaky_relu");
  return with_parameter(info, x, negative_slope);
}
// arg: dim (static).
DTensor glu(const DTensor& x, int64_t dim) {
  static const OpInfo& info = ops_op("glu");
  const ArgValue args[] = {dim};
  return dispatch(info, {&x}, args);
}

DTensor where(const DTensor& condition, const DTensor& self, const DTensor& other) {
  static const OpInfo& info = ops_op("where");
  return dispatch(info, {&condition, &self, &other});
}

DTensor cast(const DTensor& x, DType dtype) {
  if (x.defined() && x.dtype() == dtype) return x;  // as the Tensor form: no copy
  static const OpInfo& info = ops_op("cast");
  const ArgValue args[] = {dtype};
  return dispatch(info, {&x}, args);
}

DTensor operator+(const DTensor& a, const DTensor& b) {
  return add(a, b);
}
DTensor operator+(const DTensor& a, const Scalar& b) {
  return add(a, b);
}
DTensor operator-(const DTensor& a, const DTensor& b) {
  return sub(a, b);
}
DTensor operator-(const DTensor& a, const Scalar& b) {
  return sub(a, b);
}
DTensor operator-(const Scalar& a, const DTensor& b) {
  static const OpInfo& info = ops_op("rsub.Scalar");
  return scalar_op(info, b, a, result_type(b.dtype(), a));
}
DTensor operator*(const DTensor& a, const DTensor& b) {
  return mul(a, b);
}
DTensor operator*(const DTensor& a, const Scalar& b) {
  return mul(a, b);
}
DTensor operator*(const Scalar& a, const DTensor& b) {
  return mul(b, a);
}
DTensor operator/(const DTensor& a, const DTensor& b) {
  return div(a, b);
}
DTensor operator/(const DTensor& a, const Scalar& b) {
  return div(a, b);
}
DTensor operator/(const Scalar& a, const DTensor& b) {
  static const OpInfo& info = ops_op("rdiv.Scalar");
  return scalar_op(info, b, a, floating_result_type(result_type(b.dtype(), a)));
}
DTensor operator-(const DTensor& a) {
  return neg(a);
}

}  // namespace dtensor
