// Public elementwise functions: argument checks, type promotion, output allocation and device
// dispatch. The kernels are in elementwise_cpu.cc / elementwise_unary_cpu.cc.
#include "dtensor/ops/elementwise/elementwise.h"

#include <string_view>

#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/detail/elementwise_cuda.h"
#include "dtensor/ops/elementwise/detail/elementwise_impl.h"
#include "dtensor/ops/elementwise/detail/elementwise_kernels.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {

namespace {

using detail::BinaryOp;
using detail::CompareOp;
using detail::UnaryOp;

Tensor to_dtype(const Tensor& t, DType d) {
  return t.dtype() == d ? t : t.to(d);
}

// t itself when it has dtype d (no Tensor copy on the hot path), else t converted into `buf`.
const Tensor& as_dtype(const Tensor& t, DType d, Tensor& buf) {
  if (t.dtype() == d) return t;
  buf = t.to(d);
  return buf;
}

using detail::check_binary_args;

void check_not_bool(std::string_view op, DType d, std::string_view arg) {
  DT_CHECK(d != DType::kBool, "[%s] not supported for bool tensors (argument %s)", op, arg);
}

// Output dtype of an arithmetic op computing in `common`.
DType arithmetic_dtype(std::string_view op, BinaryOp kind, DType common) {
  if (kind == BinaryOp::kDiv) return floating_result_type(common);
  if (kind == BinaryOp::kSub) {
    DT_CHECK(common != DType::kBool,
             "[%s] subtraction of bool tensors is not supported (use logical ops instead)", op);
  }
  return common;
}

Tensor binary(std::string_view op, BinaryOp kind, const Tensor& self, const Tensor& other) {
  check_binary_args(op, self, other);
  return detail::binary_op(op, kind, self, other,
                           arithmetic_dtype(op, kind, result_type(self, other)));
}

Tensor binary_scalar(std::string_view op, BinaryOp kind, const Tensor& self, const Scalar& other,
                     bool scalar_first) {
  detail::check_defined(op, self, "self");
  return detail::binary_scalar_op(
      kind, self, other, arithmetic_dtype(op, kind, result_type(self, other)), scalar_first);
}

Tensor binary_inplace(std::string_view op, BinaryOp kind, const Tensor& self, const Tensor& other) {
  check_binary_args(op, self, other);
  check_no_internal_overlap(self, op);
  const Shape shape = detail::broadcast_pair(op, self.sizes(), other.sizes(), "other");
  DT_CHECK(IntSpan(shape) == IntSpan(self.sizes()),
           "[%s] output with shape %s doesn't match the broadcast shape %s (argument other)", op,
           shape_str(self.sizes()), shape_str(shape));
  const DType rt = arithmetic_dtype(op, kind, result_type(self, other));
  DT_CHECK(can_cast(rt, self.dtype()),
           "[%s] result type %s can't be cast to the desired output type %s (argument self)", op,
           dtype_name(rt), dtype_name(self.dtype()));
  // An in-place write (Storage::version), counted once the arguments are accepted: a refused
  // call writes nothing, so it must not invalidate what autograd saved.
  self.storage().bump_version();
  // An `other` that overlaps self without being self itself (x.add_(x.narrow(-1, 0, 1))) is
  // read from a copy, as copy_ does: every element then combines with other's old values,
  // whichever loop the kernel takes (one reads a repeated value once per row, others per
  // element). self itself (x.add_(x)) is safe: each element is read before it is written.
  const bool read_from_copy =
      memory_overlaps(self, other) &&
      !(other.data_ptr() == self.data_ptr() && other.dtype() == self.dtype() &&
        other.sizes() == self.sizes() && other.strides() == self.strides());
  const Tensor o = read_from_copy ? other.clone() : other;
  Tensor b1;
  (self.device().is_cuda() ? detail::binary_cuda : detail::binary_cpu)(
      kind, self, self, as_dtype(o, self.dtype(), b1));
  return self;
}

Tensor binary_scalar_inplace(std::string_view op, BinaryOp kind, const Tensor& self,
                             const Scalar& other) {
  detail::check_defined(op, self, "self");
  check_no_internal_overlap(self, op);
  const DType rt = arithmetic_dtype(op, kind, result_type(self, other));
  DT_CHECK(can_cast(rt, self.dtype()),
           "[%s] result type %s can't be cast to the desired output type %s (argument self)", op,
           dtype_name(rt), dtype_name(self.dtype()));
  self.storage().bump_version();  // an in-place write, once accepted (as binary_inplace)
  (self.device().is_cuda() ? detail::binary_scalar_cuda : detail::binary_scalar_cpu)(
      kind, self, self, other, /*scalar_first=*/false);
  return self;
}

Tensor compare(std::string_view op, CompareOp kind, const Tensor& self, const Tensor& other) {
  check_binary_args(op, self, other);
  const Shape shape = detail::broadcast_pair(op, self.sizes(), other.sizes(), "other");
  const DType dt = result_type(self, other);
  Tensor out = empty(shape, TensorOptions(DType::kBool, self.device()));
  Tensor b1, b2;
  (self.device().is_cuda() ? detail::compare_cuda : detail::compare_cpu)(
      kind, out, as_dtype(self, dt, b1), as_dtype(other, dt, b2));
  return out;
}

Tensor compare_scalar(std::string_view op, CompareOp kind, const Tensor& self,
                      const Scalar& other) {
  detail::check_defined(op, self, "self");
  const DType dt = result_type(self, other);
  Tensor out = empty(self.sizes(), TensorOptions(DType::kBool, self.device()));
  Tensor b1;
  (self.device().is_cuda() ? detail::compare_scalar_cuda : detail::compare_scalar_cpu)(
      kind, out, as_dtype(self, dt, b1), other);
  return out;
}

Tensor unary(std::string_view, UnaryOp kind, const Tensor& x, DType dt,
             const Scalar& param = Scalar()) {
  return detail::unary_op(kind, x, dt, param);
}

// exp, log, ...: integer and bool inputs compute in float32.
Tensor float_math(std::string_view op, UnaryOp kind, const Tensor& x) {
  detail::check_defined(op, x, "self");
  return unary(op, kind, x, floating_result_type(x.dtype()));
}

// gelu, silu, ...: floating inputs only.
Tensor activation(std::string_view op, UnaryOp kind, const Tensor& x) {
  detail::check_floating_input(op, x);
  return unary(op, kind, x, x.dtype());
}
// softplus, elu / celu, leaky_relu: the kernels of pointwise_math.h with two parameters.
Tensor param_activation(std::string_view op, detail::ParamActivation kind, const Tensor& x,
                        double p0, double p1) {
  detail::check_floating_input(op, x);
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype(), x.device()));
  (x.device().is_cuda() ? detail::param_activation_cuda : detail::param_activation_cpu)(kind, out,
                                                                                        x, p0, p1);
  return out;
}

}  // namespace

namespace detail {

void check_binary_args(std::string_view op, const Tensor& self, const Tensor& other) {
  check_defined(op, self, "self");
  check_defined(op, other, "other");
  check_same_device(op, self, other, "other");
}

Tensor binary_op(std::string_view op, BinaryOp kind, const Tensor& self, const Tensor& other,
                 DType dt) {
  const Shape shape = broadcast_pair(op, self.sizes(), other.sizes(), "other");
  Tensor out = empty(shape, TensorOptions(dt, self.device()));
  Tensor b1, b2;
  (self.device().is_cuda() ? binary_cuda : binary_cpu)(kind, out, as_dtype(self, dt, b1),
                                                       as_dtype(other, dt, b2));
  return out;
}

Tensor binary_scalar_op(BinaryOp kind, const Tensor& self, const Scalar& other, DType dt,
                        bool scalar_first) {
  Tensor out = empty(self.sizes(), TensorOptions(dt, self.device()));
  Tensor b1;
  (self.device().is_cuda() ? binary_scalar_cuda : binary_scalar_cpu)(
      kind, out, as_dtype(self, dt, b1), other, scalar_first);
  return out;
}

Tensor unary_op(UnaryOp kind, const Tensor& x, DType dt, const Scalar& param) {
  Tensor out = empty(x.sizes(), TensorOptions(dt, x.device()));
  Tensor b1;
  (x.device().is_cuda() ? unary_cuda : unary_cpu)(kind, out, as_dtype(x, dt, b1), param);
  return out;
}

}  // namespace detail

Tensor add(const Tensor& self, const Tensor& other) {
  return binary("add", BinaryOp::kAdd, self, other);
}
Tensor add(const Tensor& self, const Scalar& other) {
  return binary_scalar("add", BinaryOp::kAdd, self, other, false);
}
Tensor sub(const Tensor& self, const Tensor& other) {
  return binary("sub", BinaryOp::kSub, self, other);
}
Tensor sub(const Tensor& self, const Scalar& other) {
  return binary_scalar("sub", BinaryOp::kSub, self, other, false);
}
Tensor mul(const Tensor& self, const Tensor& other) {
  return binary("mul", BinaryOp::kMul, self, other);
}
Tensor mul(const Tensor& self, const Scalar& other) {
  return binary_scalar("mul", BinaryOp::kMul, self, other, false);
}
Tensor div(const Tensor& self, const Tensor& other) {
  return binary("div", BinaryOp::kDiv, self, other);
}
Tensor div(const Tensor& self, const Scalar& other) {
  return binary_scalar("div", BinaryOp::kDiv, self, other, false);
}

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator+(const Tensor& a, const Scalar& b) {
  return add(a, b);
}
Tensor operator+(const Scalar& a, const Tensor& b) {
  return add(b, a);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator-(const Tensor& a, const Scalar& b) {
  return sub(a, b);
}
Tensor operator-(const Scalar& a, const Tensor& b) {
  return binary_scalar("sub", BinaryOp::kSub, b, a, true);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator*(const Tensor& a, const Scalar& b) {
  return mul(a, b);
}
Tensor operator*(const Scalar& a, const Tensor& b) {
  return mul(b, a);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator/(const Tensor& a, const Scalar& b) {
  return div(a, b);
}
Tensor operator/(const Scalar& a, const Tensor& b) {
  return binary_scalar("div", BinaryOp::kDiv, b, a, true);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}

Tensor neg(const Tensor& x) {
  detail::check_defined("neg", x, "self");
  check_not_bool("neg", x.dtype(), "self");
  return unary("neg", UnaryOp::kNeg, x, x.dtype());
}
Tensor abs(const Tensor& x) {
  detail::check_defined("abs", x, "self");
  check_not_bool("abs", x.dtype(), "self");
  return unary("abs", UnaryOp::kAbs, x, x.dtype());
}
Tensor exp(const Tensor& x) {
  return float_math("exp", UnaryOp::kExp, x);
}
Tensor log(const Tensor& x) {
  return float_math("log", UnaryOp::kLog, x);
}
Tensor sqrt(const Tensor& x) {
  return float_math("sqrt", UnaryOp::kSqrt, x);
}
Tensor rsqrt(const Tensor& x) {
  return float_math("rsqrt", UnaryOp::kRsqrt, x);
}
Tensor sigmoid(const Tensor& x) {
  return float_math("sigmoid", UnaryOp::kSigmoid, x);
}
Tensor tanh(const Tensor& x) {
  return float_math("tanh", UnaryOp::kTanh, x);
}
Tensor sin(const Tensor& x) {
  return float_math("sin", UnaryOp::kSin, x);
}
Tensor cos(const Tensor& x) {
  return float_math("cos", UnaryOp::kCos, x);
}
Tensor tan(const Tensor& x) {
  return float_math("tan", UnaryOp::kTan, x);
}
Tensor erf(const Tensor& x) {
  return float_math("erf", UnaryOp::kErf, x);
}
Tensor exp2(const Tensor& x) {
  return float_math("exp2", UnaryOp::kExp2, x);
}
Tensor expm1(const Tensor& x) {
  return float_math("expm1", UnaryOp::kExpm1, x);
}
Tensor log1p(const Tensor& x) {
  return float_math("log1p", UnaryOp::kLog1p, x);
}
Tensor log2(const Tensor& x) {
  return float_math("log2", UnaryOp::kLog2, x);
}
Tensor log10(const Tensor& x) {
  return float_math("log10", UnaryOp::kLog10, x);
}
Tensor erfinv(const Tensor& x) {
  return float_math("erfinv", UnaryOp::kErfinv, x);
}
Tensor sinh(const Tensor& x) {
  return float_math("sinh", UnaryOp::kSinh, x);
}
Tensor cosh(const Tensor& x) {
  return float_math("cosh", UnaryOp::kCosh, x);
}
Tensor asin(const Tensor& x) {
  return float_math("asin", UnaryOp::kAsin, x);
}
Tensor acos(const Tensor& x) {
  return float_math("acos", UnaryOp::kAcos, x);
}
Tensor atan(const Tensor& x) {
  return float_math("atan", UnaryOp::kAtan, x);
}
Tensor asinh(const Tensor& x) {
  return float_math("asinh", UnaryOp::kAsinh, x);
}
Tensor acosh(const Tensor& x) {
  return float_math("acosh", UnaryOp::kAcosh, x);
}
Tensor atanh(const Tensor& x) {
  return float_math("atanh", UnaryOp::kAtanh, x);
}
Tensor erfc(const Tensor& x) {
  return float_math("erfc", UnaryOp::kErfc, x);
}
Tensor log_sigmoid(const Tensor& x) {
  return float_math("log_sigmoid", UnaryOp::kLogSigmoid, x);
}
Tensor hardsigmoid(const Tensor& x) {
  return float_math("hardsigmoid", UnaryOp::kHardsigmoid, x);
}
Tensor hardswish(const Tensor& x) {
  return float_math("hardswish", UnaryOp::kHardswish, x);
}
Tensor mish(const Tensor& x) {
  return float_math("mish", UnaryOp::kMish, x);
}
Tensor selu(const Tensor& x) {
  return float_math("selu", UnaryOp::kSelu, x);
}
Tensor reciprocal(const Tensor& x) {
  return float_math("reciprocal", UnaryOp::kReciprocal, x);
}

namespace {
// Rounding and sign keep the dtype (integers included: the identity for rounding).
Tensor same_dtype_unary(std::string_view op, UnaryOp kind, const Tensor& x) {
  detail::check_defined(op, x, "self");
  check_not_bool(op, x.dtype(), "self");
  return unary(op, kind, x, x.dtype());
}
}  // namespace
Tensor floor(const Tensor& x) {
  return same_dtype_unary("floor", UnaryOp::kFloor, x);
}
Tensor ceil(const Tensor& x) {
  return same_dtype_unary("ceil", UnaryOp::kCeil, x);
}
Tensor round(const Tensor& x) {
  return same_dtype_unary("round", UnaryOp::kRound, x);
}
Tensor trunc(const Tensor& x) {
  return same_dtype_unary("trunc", UnaryOp::kTrunc, x);
}
Tensor sign(const Tensor& x) {
  if (x.defined() && x.dtype() == DType::kBool) return x.clone();  // PyTorch: bool stays bool
  return same_dtype_unary("sign", UnaryOp::kSign, x);
}
Tensor frac(const Tensor& x) {
  detail::check_defined("frac", x, "self");
  DT_CHECK(is_floating(x.dtype()), "[frac] argument self has dtype %s, expected a floating dtype",
           dtype_name(x.dtype()));
  return unary("frac", UnaryOp::kFrac, x, x.dtype());
}

Tensor pow(const Tensor& x, const Scalar& exponent) {
  detail::check_defined("pow", x, "self");
  const DType dt = result_type(x, exponent);
  DT_CHECK(is_floating(dt) || exponent.to_int() >= 0,
           "[pow] integers to negative integer powers are not allowed (exponent %d on a %s "
           "tensor)",
           exponent.to_int(), dtype_name(x.dtype()));
  return unary("pow", UnaryOp::kPow, x, dt, exponent);
}

Tensor relu(const Tensor& x) {
  detail::check_defined("relu", x, "self");
  check_not_bool("relu", x.dtype(), "self");
  return unary("relu", UnaryOp::kRelu, x, x.dtype());
}
Tensor gelu(const Tensor& x, GeluApproximate approximate) {
  return activation("gelu",
                    approximate == GeluApproximate::kTanh ? UnaryOp::kGeluTanh : UnaryOp::kGelu, x);
}
Tensor silu(const Tensor& x) {
  return activation("silu", UnaryOp::kSilu, x);
}
Tensor relu6(const Tensor& x) {
  detail::check_defined("relu6", x, "self");
  check_not_bool("relu6", x.dtype(), "self");
  return unary("relu6", UnaryOp::kRelu6, x, x.dtype());
}
Tensor softplus(const Tensor& x, double beta, double threshold) {
  return param_activation("softplus", detail::ParamActivation::kSoftplus, x, beta, threshold);
}
Tensor elu(const Tensor& x, double alpha) {
  return param_activation("elu", detail::ParamActivation::kElu, x, alpha, 1.0);
}
// PyTorch's celu: elu with input_scale 1 / alpha.
Tensor celu(const Tensor& x, double alpha) {
  DT_CHECK(alpha != 0.0, "[celu] alpha cannot be 0 for CELU");
  return param_activation("celu", detail::ParamActivation::kElu, x, alpha, 1.0 / alpha);
}
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return param_activation("leaky_relu", detail::ParamActivation::kLeakyRelu, x, negative_slope,
                          0.0);
}
// One pass of the sigmoid gate over the two halves (strided views of x; no copies).
Tensor glu(const Tensor& x, int64_t dim) {
  detail::check_floating_input("glu", x);
  DT_CHECK(x.dim() > 0, "[glu] glu does not support scalars because halving size must be even");
  const int64_t d = normalize_dim(dim, x.dim(), "glu");
  const int64_t n = x.size(d);
  DT_CHECK(n % 2 == 0, "[glu] halving dimension must be even, but dimension %d is size %d", d, n);
  return detail::binary_op("glu", BinaryOp::kSigmoidGate, x.narrow(d, 0, n / 2),
                           x.narrow(d, n / 2, n / 2), x.dtype());
}

Tensor maximum(const Tensor& self, const Tensor& other) {
  return binary("maximum", BinaryOp::kMaximum, self, other);
}
Tensor minimum(const Tensor& self, const Tensor& other) {
  return binary("minimum", BinaryOp::kMinimum, self, other);
}

#define DT_DEFINE_COMPARE(name, kind)                           \
  Tensor name(const Tensor& self, const Tensor& other) {        \
    return compare(#name, CompareOp::kind, self, other);        \
  }                                                             \
  Tensor name(const Tensor& self, const Scalar& other) {        \
    return compare_scalar(#name, CompareOp::kind, self, other); \
  }
DT_DEFINE_COMPARE(eq, kEq)
DT_DEFINE_COMPARE(ne, kNe)
DT_DEFINE_COMPARE(lt, kLt)
DT_DEFINE_COMPARE(le, kLe)
DT_DEFINE_COMPARE(gt, kGt)
DT_DEFINE_COMPARE(ge, kGe)
#undef DT_DEFINE_COMPARE

Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  detail::check_defined("where", condition, "condition");
  check_binary_args("where", self, other);
  detail::check_same_device("where", self, condition, "condition");
  DT_CHECK(condition.dtype() == DType::kBool,
           "[where] expected a bool condition, got %s (argument condition)",
           dtype_name(condition.dtype()));
  Shape shape = detail::broadcast_pair("where", condition.sizes(), self.sizes(), "self");
  shape = detail::broadcast_pair("where", shape, other.sizes(), "other");
  const DType dt = result_type(self, other);
  Tensor out = empty(shape, TensorOptions(dt, self.device()));
  Tensor b1, b2;
  (self.device().is_cuda() ? detail::where_cuda : detail::where_cpu)(
      out, condition, as_dtype(self, dt, b1), as_dtype(other, dt, b2));
  return out;
}

Tensor cast(const Tensor& x, DType dtype) {
  detail::check_defined("cast", x, "self");
  return to_dtype(x, dtype);
}

Tensor add_(const Tensor& self, const Tensor& other) {
  return binary_inplace("add_", BinaryOp::kAdd, self, other);
}
Tensor add_(const Tensor& self, const Scalar& other) {
  return binary_scalar_inplace("add_", BinaryOp::kAdd, self, other);
}
Tensor sub_(const Tensor& self, const Tensor& other) {
  return binary_inplace("sub_", BinaryOp::kSub, self, other);
}
Tensor sub_(const Tensor& self, const Scalar& other) {
  return binary_scalar_inplace("sub_", BinaryOp::kSub, self, other);
}
Tensor mul_(const Tensor& self, const Tensor& other) {
  return binary_inplace("mul_", BinaryOp::kMul, self, other);
}
Tensor mul_(const Tensor& self, const Scalar& other) {
  return binary_scalar_inplace("mul_", BinaryOp::kMul, self, other);
}
Tensor div_(const Tensor& self, const Tensor& other) {
  return binary_inplace("div_", BinaryOp::kDiv, self, other);
}
Tensor div_(const Tensor& self, const Scalar& other) {
  return binary_scalar_inplace("div_", BinaryOp::kDiv, self, other);
}

Tensor fill_(const Tensor& self, const Scalar& value) {
  detail::check_defined("fill_", self, "self");
  Tensor t = self;
  t.fill_(value);
  return t;
}
Tensor zero_(const Tensor& self) {
  detail::check_defined("zero_", self, "self");
  Tensor t = self;
  t.zero_();
  return t;
}
Tensor copy_(const Tensor& dst, const Tensor& src) {
  detail::check_defined("copy_", dst, "self");
  detail::check_defined("copy_", src, "src");
  Tensor t = dst;
  t.copy_(src);
  return t;
}

}  // namespace dtensor
