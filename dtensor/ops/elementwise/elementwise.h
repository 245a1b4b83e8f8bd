// Elementwise ops on local tensors (PyTorch semantics).
//
// Binary ops broadcast their inputs (NumPy rules) and compute in the promoted dtype
// (dtensor/ops/common/detail/type_promotion.h); bf16/fp16 are computed in float and rounded once.
// Inputs must live on one device. Float-only math (exp, log, sqrt, rsqrt, sigmoid, tanh, div) on
// integer or bool inputs computes in float32, as PyTorch does; the activations gelu, silu,
// softplus, elu, celu, leaky_relu and glu require a floating input, as in PyTorch. Errors name
// the op and the argument, e.g. "[add] cannot broadcast shapes [2, 3] and [4] (argument
// other)".
#pragma once

#include <optional>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// ---- arithmetic ------------------------------------------------------------------------------
// self + other. On bool inputs add is logical or, mul logical and.
Tensor add(const Tensor& self, const Tensor& other);
Tensor add(const Tensor& self, const Scalar& other);
// self - other. Bool inputs raise (as in PyTorch; use logical ops instead).
Tensor sub(const Tensor& self, const Tensor& other);
Tensor sub(const Tensor& self, const Scalar& other);
Tensor mul(const Tensor& self, const Tensor& other);
Tensor mul(const Tensor& self, const Scalar& other);
// True division: integer and bool inputs give float32.
Tensor div(const Tensor& self, const Tensor& other);
Tensor div(const Tensor& self, const Scalar& other);

// Operator forms of add, sub, mul and div (unary minus: neg), Scalars on either side.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator-(const Scalar& a, const Tensor& b);  // a - b, elementwise
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator/(const Scalar& a, const Tensor& b);  // a / b, elementwise
Tensor operator-(const Tensor& a);                   // neg(a)

// ---- unary math ------------------------------------------------------------------------------
// -x; same dtype. Bool raises.
Tensor neg(const Tensor& x);
// |x|; same dtype. Bool raises.
Tensor abs(const Tensor& x);
// exp, log, sqrt, 1/sqrt, 1/(1+exp(-x)), tanh: floating inputs keep their dtype, integer and
// bool inputs give float32. log/sqrt of negative values give NaN, log(0) = -inf. The CPU kernels
// of exp, log, tanh, sigmoid and the activations below are vectorised (Google Highway's exp,
// log, tanh: 1, 4 and 4 ulp; SLEEF's erfc: 1.5 ulp), within 1e-6 relative of float64 for float32.
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
// sin, cos, tan, erf, 2^x, exp(x) - 1, log(1 + x), log2, log10, 1/x: floating inputs keep their
// dtype, integer and bool inputs give float32 (as exp). Computed by libm per element (not
// vectorised yet).
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor erf(const Tensor& x);
// The inverse of erf on [-1, 1] (+-inf at +-1, NaN outside); same dtype rule as erf.
Tensor erfinv(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor reciprocal(const Tensor& x);
// More math (libm / the CUDA math library per element, same dtype rule as sin): hyperbolic
// and inverse trigonometric functions, erfc; and activations (torch.nn.functional):
// log_sigmoid = log(sigmoid(x)) (computed without overflow), hardsigmoid = relu6(x + 3) / 6,
// hardswish = x * hardsigmoid(x), mish = x * tanh(softplus(x)) (softplus threshold 20, as
// PyTorch), selu with PyTorch's alpha and scale.
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor log_sigmoid(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);
Tensor hardswish(const Tensor& x);
Tensor mish(const Tensor& x);
Tensor selu(const Tensor& x);
// Rounding: same dtype, the identity on integers (bool raises). round is half to even (as
// PyTorch). frac(x) = x - trunc(x), floating only. sign(x) in {-1, 0, 1}, same dtype; sign(NaN)
// is 0, as PyTorch; sign of a bool tensor is a copy of it (PyTorch's).
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor frac(const Tensor& x);
Tensor sign(const Tensor& x);
// x ** exponent. The dtype is result_type(x, exponent): an integer tensor with an integer
// exponent stays integer (negative integer exponents raise), a floating exponent gives float32.
Tensor pow(const Tensor& x, const Scalar& exponent);

// ---- more pointwise math (elementwise_math.cc) -------------------------------------------------
// x * x, same dtype; a bool tensor gives int64 (PyTorch's square(bool) is pow(bool, 2)).
Tensor square(const Tensor& x);
// x ** exponent elementwise in result_type(x, exponent). Integers: a negative exponent gives
// 1 for x = 1, +-1 for x = -1 and 0 otherwise (PyTorch's integer pow).
Tensor pow(const Tensor& x, const Tensor& exponent);
// Remainders in result_type(self, other) (bool raises): fmod has the sign of self (C's fmod,
// truncated division), remainder the sign of other (Python's %, floored division). Integer
// division by zero raises "[fmod] integer division by zero"; floating gives NaN.
Tensor fmod(const Tensor& self, const Tensor& other);
Tensor fmod(const Tensor& self, const Scalar& other);
Tensor remainder(const Tensor& self, const Tensor& other);
Tensor remainder(const Tensor& self, const Scalar& other);
// atan2(self, other) = the angle of (other, self); integers give float32. hypot(self, other) =
// sqrt(self^2 + other^2) without overflow, floating inputs only.
Tensor atan2(const Tensor& self, const Tensor& other);
Tensor hypot(const Tensor& self, const Tensor& other);
// log(exp(self) + exp(other)) without overflow (max + log1p(exp(-|self - other|)); two equal
// infinities give themselves, logaddexp(-inf, -inf) = -inf), in result_type(self, other), which
// must be floating. xlogy(self, other) = self * log(other), 0 where self == 0 unless other is NaN
// (xlogy(0, 0) = 0, xlogy(0, nan) = nan). copysign(self, other) = |self| with the sign bit of
// other (-0.0 and a NaN's sign count). xlogy and copysign compute integer and bool inputs in
// float32, as PyTorch.
Tensor logaddexp(const Tensor& self, const Tensor& other);
Tensor xlogy(const Tensor& self, const Tensor& other);
Tensor copysign(const Tensor& self, const Tensor& other);
// min(max(x, min), max) elementwise (a bound left out is not applied; at least one is needed);
// dtype result_type(x, min, max); NaN stays NaN; min > max gives max everywhere, as PyTorch.
// clip is clamp.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
Tensor clamp_min(const Tensor& x, const Scalar& min);
Tensor clamp_max(const Tensor& x, const Scalar& max);
Tensor clip(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
// NaN -> nan, +inf -> posinf, -inf -> neginf (defaults: 0, the dtype's largest and lowest finite
// values); integer and bool tensors are returned copied.
Tensor nan_to_num(const Tensor& x, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);
// Bool tests of floating values (integer and bool tensors: no NaN, no infinity).
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isposinf(const Tensor& x);
Tensor isneginf(const Tensor& x);
Tensor isfinite(const Tensor& x);
// Logical ops on any dtype (nonzero is true), bool result, broadcasting.
Tensor logical_not(const Tensor& x);
Tensor logical_and(const Tensor& self, const Tensor& other);
Tensor logical_or(const Tensor& self, const Tensor& other);
Tensor logical_xor(const Tensor& self, const Tensor& other);
// Bitwise ops on integer and bool tensors (result_type; floating raises); on bool they are the
// logical ops.
Tensor bitwise_and(const Tensor& self, const Tensor& other);
Tensor bitwise_or(const Tensor& self, const Tensor& other);
Tensor bitwise_xor(const Tensor& self, const Tensor& other);
Tensor bitwise_not(const Tensor& x);
// self with `value` where the bool mask (broadcastable to self's shape) is true; self's dtype.
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value);
// start + weight * (end - start), floating inputs only.
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
// self + value * tensor1 * tensor2, and self + value * tensor1 / tensor2 (integer division
// refused).
Tensor addcmul(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
               const Scalar& value = Scalar(int64_t{1}));
Tensor addcdiv(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
               const Scalar& value = Scalar(int64_t{1}));

// ---- activations -----------------------------------------------------------------------------
// max(x, 0); same dtype (integers allowed, bool raises). NaN stays NaN.
Tensor relu(const Tensor& x);
enum class GeluApproximate { kNone, kTanh };
// x * Phi(x) (kNone, with erf) or the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Floating inputs only.
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::kNone);
// x * sigmoid(x). Floating inputs only.
Tensor silu(const Tensor& x);
// More activations, with torch.nn.functional's names, defaults and values (kernels: one
// formula per element for both devices, dtensor/ops/elementwise/detail/pointwise_math.h; computed
// in float for 16-bit floats, parameters converted to that type first). min(max(x, 0), 6)
// (PyTorch's hardtanh(x, 0, 6)); same dtype, integers allowed, bool raises; NaN and -0.0 stay.
Tensor relu6(const Tensor& x);
// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold. Floating inputs only.
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
// x for x > 0, alpha (exp(x) - 1) for x <= 0; NaN stays NaN. Floating inputs only.
Tensor elu(const Tensor& x, double alpha = 1.0);
// max(0, x) + min(0, alpha (exp(x / alpha) - 1)) (PyTorch's elu with input_scale 1 / alpha);
// alpha = 0 raises "[celu] alpha cannot be 0 for CELU". Floating inputs only.
Tensor celu(const Tensor& x, double alpha = 1.0);
// x for x > 0, negative_slope * x otherwise. Floating inputs only.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
// a * sigmoid(b), where a and b are the first and second halves of x along dim (which must
// have an even size; a 0-d x raises). The result has half of x's size along dim. Floating
// inputs only.
Tensor glu(const Tensor& x, int64_t dim = -1);

// ---- activation gradients (the local backward kernels of the activations) --------------------
// Each takes the gradient of the activation's output and one forward tensor of the same shape,
// floating dtype and device, and returns grad times the derivative as a new contiguous tensor of
// that shape and dtype (16-bit computed in float, rounded once; CPU kernels vectorised like the
// forward activations).
// d/dx gelu(x) = Phi(x) + x phi(x) (kNone), or the derivative of the tanh form.
Tensor gelu_backward(const Tensor& grad, const Tensor& x,
                     GeluApproximate approximate = GeluApproximate::kNone);
// d/dx silu(x) = s (1 + x (1 - s)), s = sigmoid(x).
Tensor silu_backward(const Tensor& grad, const Tensor& x);
// From the forward's OUTPUT out = sigmoid(x): grad * out * (1 - out).
Tensor sigmoid_backward(const Tensor& grad, const Tensor& out);
// From the forward's OUTPUT out = tanh(x): grad * (1 - out^2).
Tensor tanh_backward(const Tensor& grad, const Tensor& out);

// ---- binary min/max --------------------------------------------------------------------------
// Elementwise max/min in the promoted dtype; a NaN in either input gives NaN.
Tensor maximum(const Tensor& self, const Tensor& other);
Tensor minimum(const Tensor& self, const Tensor& other);

// ---- comparisons (bool output, computed in the promoted dtype) --------------------------------
// self == other, !=, <, <=, >, >= elementwise (broadcast, compared in the promoted dtype).
Tensor eq(const Tensor& self, const Tensor& other);
Tensor eq(const Tensor& self, const Scalar& other);
Tensor ne(const Tensor& self, const Tensor& other);
Tensor ne(const Tensor& self, const Scalar& other);
Tensor lt(const Tensor& self, const Tensor& other);
Tensor lt(const Tensor& self, const Scalar& other);
Tensor le(const Tensor& self, const Tensor& other);
Tensor le(const Tensor& self, const Scalar& other);
Tensor gt(const Tensor& self, const Tensor& other);
Tensor gt(const Tensor& self, const Scalar& other);
Tensor ge(const Tensor& self, const Tensor& other);
Tensor ge(const Tensor& self, const Scalar& other);

// ---- selection and conversion ----------------------------------------------------------------
// condition ? self : other elementwise; the three broadcast together. condition must be bool;
// the result has dtype result_type(self, other).
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other);
// x converted to dtype (16-bit floats round to nearest even, bool tests nonzero). Returns x
// itself, without a copy, when it already has that dtype (like Tensor::to).
Tensor cast(const Tensor& x, DType dtype);

// ---- in place --------------------------------------------------------------------------------
// self op= other, written into self (any strides) and returned. The result keeps self's dtype
// and shape: other must broadcast to self's shape, and the promoted dtype must not be of a
// higher category than self's (an int tensor cannot take a float result). other is converted
// to self's dtype first. An other that overlaps self in memory (other than self itself) is
// read from a copy: the result combines self with other's values from before the call.
Tensor add_(const Tensor& self, const Tensor& other);
Tensor add_(const Tensor& self, const Scalar& other);
Tensor sub_(const Tensor& self, const Tensor& other);
Tensor sub_(const Tensor& self, const Scalar& other);
Tensor mul_(const Tensor& self, const Tensor& other);
Tensor mul_(const Tensor& self, const Scalar& other);
Tensor div_(const Tensor& self, const Tensor& other);
Tensor div_(const Tensor& self, const Scalar& other);
// Tensor::fill_, zero_ and copy_ (broadcasting src, converting dtype) as free functions.
Tensor fill_(const Tensor& self, const Scalar& value);
Tensor zero_(const Tensor& self);
Tensor copy_(const Tensor& dst, const Tensor& src);

// ---- DTensor forms ---------------------------------------------------------------------------
// The same ops on DTensors, dispatched through sharding propagation (elementwise_strategy.cc):
// the result equals the op on the full tensors. Broadcasting maps shard dims through the
// aligned dims; Partial(sum/avg) inputs pass through add/sub (both Partial), mul (one side),
// div (numerator), neg and scaling by a Scalar; Partial(max/min) pass through the unary ops
// monotone over the extended reals (relu, exp, sigmoid, tanh, rounding, ...; neg swaps max and
// min); every other op first reduces Partial inputs (the cheapest of all-reduce /
// reduce-scatter under the cost model). Inputs must share one
// mesh. Scalars are runtime values (not in the propagation cache key).
DTensor add(const DTensor& self, const DTensor& other);
DTensor add(const DTensor& self, const Scalar& other);
DTensor sub(const DTensor& self, const DTensor& other);
DTensor sub(const DTensor& self, const Scalar& other);
DTensor mul(const DTensor& self, const DTensor& other);
DTensor mul(const DTensor& self, const Scalar& other);
DTensor div(const DTensor& self, const DTensor& other);
DTensor div(const DTensor& self, const Scalar& other);
DTensor operator+(const DTensor& a, const DTensor& b);
DTensor operator+(const DTensor& a, const Scalar& b);
DTensor operator-(const DTensor& a, const DTensor& b);
DTensor operator-(const DTensor& a, const Scalar& b);
DTensor operator-(const Scalar& a, const DTensor& b);
DTensor operator*(const DTensor& a, const DTensor& b);
DTensor operator*(const DTensor& a, const Scalar& b);
DTensor operator*(const Scalar& a, const DTensor& b);
DTensor operator/(const DTensor& a, const DTensor& b);
DTensor operator/(const DTensor& a, const Scalar& b);
DTensor operator/(const Scalar& a, const DTensor& b);
DTensor operator-(const DTensor& a);

// DTensor forms of the unary math, activations, maximum and minimum above (same semantics).
DTensor neg(const DTensor& x);
DTensor abs(const DTensor& x);
DTensor exp(const DTensor& x);
DTensor log(const DTensor& x);
DTensor sqrt(const DTensor& x);
DTensor rsqrt(const DTensor& x);
DTensor sigmoid(const DTensor& x);
DTensor tanh(const DTensor& x);
DTensor sin(const DTensor& x);
DTensor cos(const DTensor& x);
DTensor tan(const DTensor& x);
DTensor erf(const DTensor& x);
DTensor erfinv(const DTensor& x);
DTensor exp2(const DTensor& x);
DTensor expm1(const DTensor& x);
DTensor log1p(const DTensor& x);
DTensor log2(const DTensor& x);
DTensor log10(const DTensor& x);
DTensor reciprocal(const DTensor& x);
DTensor sinh(const DTensor& x);
DTensor cosh(const DTensor& x);
DTensor asin(const DTensor& x);
DTensor acos(const DTensor& x);
DTensor atan(const DTensor& x);
DTensor asinh(const DTensor& x);
DTensor acosh(const DTensor& x);
DTensor atanh(const DTensor& x);
DTensor erfc(const DTensor& x);
DTensor log_sigmoid(const DTensor& x);
DTensor hardsigmoid(const DTensor& x);
DTensor hardswish(const DTensor& x);
DTensor mish(const DTensor& x);
DTensor selu(const DTensor& x);
DTensor floor(const DTensor& x);
DTensor ceil(const DTensor& x);
DTensor round(const DTensor& x);
DTensor trunc(const DTensor& x);
DTensor frac(const DTensor& x);
DTensor sign(const DTensor& x);
DTensor pow(const DTensor& x, const Scalar& exponent);
DTensor relu(const DTensor& x);
DTensor gelu(const DTensor& x, GeluApproximate approximate = GeluApproximate::kNone);
DTensor silu(const DTensor& x);
DTensor relu6(const DTensor& x);
DTensor softplus(const DTensor& x, double beta = 1.0, double threshold = 20.0);
DTensor elu(const DTensor& x, double alpha = 1.0);
DTensor celu(const DTensor& x, double alpha = 1.0);
DTensor leaky_relu(const DTensor& x, double negative_slope = 0.01);
// glu's dim must be whole on each rank: an input sharded along it is redistributed first (a
// shard of x is not a shard of each half); every other dim keeps its shard.
DTensor glu(const DTensor& x, int64_t dim = -1);
DTensor maximum(const DTensor& self, const DTensor& other);
DTensor minimum(const DTensor& self, const DTensor& other);

// DTensor forms of the pointwise math above (same semantics). Integer fmod / remainder by
// zero is raised on every rank that may hold different divisors. The predicates, logical and
// bitwise ops are not differentiable.
DTensor square(const DTensor& x);
DTensor pow(const DTensor& x, const DTensor& exponent);
DTensor fmod(const DTensor& self, const DTensor& other);
DTensor fmod(const DTensor& self, const Scalar& other);
DTensor remainder(const DTensor& self, const DTensor& other);
DTensor remainder(const DTensor& self, const Scalar& other);
DTensor atan2(const DTensor& self, const DTensor& other);
DTensor hypot(const DTensor& self, const DTensor& other);
// logaddexp is increasing in each input: Partial(max) or Partial(min) in one input with the
// other replicated passes through (as PyTorch's DTensor rules).
DTensor logaddexp(const DTensor& self, const DTensor& other);
DTensor xlogy(const DTensor& self, const DTensor& other);
DTensor copysign(const DTensor& self, const DTensor& other);
DTensor clamp(const DTensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
DTensor clamp(const DTensor& x, const DTensor& min, const DTensor& max);
DTensor clamp_min(const DTensor& x, const Scalar& min);
DTensor clamp_max(const DTensor& x, const Scalar& max);
DTensor clip(const DTensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
DTensor nan_to_num(const DTensor& x, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                   std::optional<double> neginf = std::nullopt);
DTensor isnan(const DTensor& x);
DTensor isinf(const DTensor& x);
DTensor isposinf(const DTensor& x);
DTensor isneginf(const DTensor& x);
DTensor isfinite(const DTensor& x);
DTensor logical_not(const DTensor& x);
DTensor logical_and(const DTensor& self, const DTensor& other);
DTensor logical_or(const DTensor& self, const DTensor& other);
DTensor logical_xor(const DTensor& self, const DTensor& other);
DTensor bitwise_and(const DTensor& self, const DTensor& other);
DTensor bitwise_or(const DTensor& self, const DTensor& other);
DTensor bitwise_xor(const DTensor& self, const DTensor& other);
DTensor bitwise_not(const DTensor& x);
DTensor masked_fill(const DTensor& self, const DTensor& mask, const Scalar& value);
DTensor lerp(const DTensor& start, const DTensor& end, const Scalar& weight);
DTensor lerp(const DTensor& start, const DTensor& end, const DTensor& weight);
DTensor addcmul(const DTensor& self, const DTensor& tensor1, const DTensor& tensor2,
                const Scalar& value = Scalar(int64_t{1}));
DTensor addcdiv(const DTensor& self, const DTensor& tensor1, const DTensor& tensor2,
                const Scalar& value = Scalar(int64_t{1}));

// DTensor comparisons (bool result, as above).
DTensor eq(const DTensor& self, const DTensor& other);
DTensor eq(const DTensor& self, const Scalar& other);
DTensor ne(const DTensor& self, const DTensor& other);
DTensor ne(const DTensor& self, const Scalar& other);
DTensor lt(const DTensor& self, const DTensor& other);
DTensor lt(const DTensor& self, const Scalar& other);
DTensor le(const DTensor& self, const DTensor& other);
DTensor le(const DTensor& self, const Scalar& other);
DTensor gt(const DTensor& self, const DTensor& other);
DTensor gt(const DTensor& self, const Scalar& other);
DTensor ge(const DTensor& self, const DTensor& other);
DTensor ge(const DTensor& self, const Scalar& other);

// DTensor forms of where and cast (as above).
DTensor where(const DTensor& condition, const DTensor& self, const DTensor& other);
DTensor cast(const DTensor& x, DType dtype);

// In place on self's local shard; self keeps its placements (other is redistributed as
// needed). Returns self. Throws "[add_] in-place op would change placements of argument self
// from [P(max)] to [S(0)]" when no strategy keeps them.
const DTensor& add_(const DTensor& self, const DTensor& other);
const DTensor& add_(const DTensor& self, const Scalar& other);
const DTensor& sub_(const DTensor& self, const DTensor& other);
const DTensor& sub_(const DTensor& self, const Scalar& other);
const DTensor& mul_(const DTensor& self, const DTensor& other);
const DTensor& mul_(const DTensor& self, const Scalar& other);
const DTensor& div_(const DTensor& self, const DTensor& other);
const DTensor& div_(const DTensor& self, const Scalar& other);
// Overwrites, in place with self's placements kept: copy_ writes src (broadcast to self's
// shape, any dtype converted, redistributed to self's placements: a Partial src into a
// Partial self of the same op); zero_ works on any placement; fill_ refuses a Partial self
// ("[fill_.Scalar] in-place op would change placements ..."). Differentiable: self's gradient
// is zero, src's the incoming gradient.
const DTensor& copy_(const DTensor& self, const DTensor& src);
const DTensor& fill_(const DTensor& self, const Scalar& value);
const DTensor& zero_(const DTensor& self);

}  // namespace dtensor
