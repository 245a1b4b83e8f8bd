// The elementwise kernel interface between the public functions (elementwise.cc, which check
// arguments, promote dtypes and allocate outputs) and the per-device kernels
// (elementwise_cpu.cc, elementwise_cuda.cu). Kernels receive operands already converted to
// one dtype and broadcastable to `out`; `out` may alias an input exactly (in-place ops).
#pragma once

#include <cstdint>

#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

enum class BinaryOp : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kPow,
  kFmod,
  kRemainder,
  kAtan2,
  kHypot,  // pointwise_math.h
  kLogaddexp,
  kXlogy,
  kCopysign,     // pointwise_math.h, floating only
  kSigmoidGate,  // a * sigmoid(b): glu's halves, floating only
  kBitAnd,
  kBitOr,
  kBitXor  // integers and bool only
};
enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };
enum class UnaryOp : uint8_t {
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kSigmoid,
  kTanh,
  kRelu,
  kGelu,
  kGeluTanh,
  kSilu,
  kPow,
  kSin,
  kCos,
  kTan,
  kErf,
  kExp2,
  kExpm1,
  kLog1p,
  kLog2,
  kLog10,
  kReciprocal,
  kFloor,
  kCeil,
  kRound,
  kTrunc,
  kFrac,
  kSign,
  kErfinv,
  kSinh,
  kCosh,
  kAsin,
  kAcos,
  kAtan,
  kAsinh,
  kAcosh,
  kAtanh,
  kErfc,  // more math
  kLogSigmoid,
  kHardsigmoid,
  kHardswish,
  kMish,
  kSelu,   // activations
  kRelu6,  // min(max(x, 0), 6): floating and integer
  kBitNot  // integers (~x) and bool (!x) only
};

// The error of a kernel's typed switch that has no case for `op` on `dtype`, e.g.
// "[binary_cpu] op 15 not supported for float32" (`kernel` names the switch).
template <typename Op>
[[noreturn]] void unsupported_op(const char* kernel, Op op, DType dtype) {
  DT_FAIL("[%s] op %d not supported for %s", kernel, static_cast<int>(op), dtype_name(dtype));
}

// out = a op b (all one dtype).
void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
// out = a op s, or s op a when scalar_first (a and out of one dtype; s converted to its
// compute type).
void binary_scalar_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Scalar& s,
                       bool scalar_first);
// out (bool) = a op b (a, b of one dtype).
void compare_cpu(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void compare_scalar_cpu(CompareOp op, const Tensor& out, const Tensor& a, const Scalar& s);
// out = op(a), same dtype; `param` is pow's exponent. Float-only ops get floating dtypes.
void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& a, const Scalar& param);
// out = a with NaN, +inf, -inf replaced by the three values (a, out of one floating dtype).
void nan_to_num_cpu(const Tensor& out, const Tensor& a, double nan, double posinf, double neginf);
// The activations with parameters (pointwise_math.h): softplus (p0 = beta, p1 = threshold),
// elu (p0 = alpha, p1 = input_scale: 1 for elu, 1 / alpha for celu), leaky_relu (p0 =
// negative_slope). out = f(a), of one floating dtype; the parameters are converted to the
// compute type first (float for 16-bit floats), as PyTorch's opmath.
enum class ParamActivation : uint8_t { kSoftplus, kElu, kLeakyRelu };
void param_activation_cpu(ParamActivation op, const Tensor& out, const Tensor& a, double p0,
                          double p1);
// out = cond ? a : b (cond bool; a, b, out of one dtype).
void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

// Activation gradients: out = grad * f'(x) for gelu (erf / tanh form) and silu, from the
// forward's input x; grad * y (1 - y) for sigmoid and grad * (1 - y^2) for tanh, from the
// forward's output y (passed as x).
enum class ActivationGrad : uint8_t { kGelu, kGeluTanh, kSilu, kSigmoid, kTanh };
// out, grad, x: one floating dtype, grad and x broadcastable to out.
void activation_backward_cpu(ActivationGrad op, const Tensor& out, const Tensor& grad,
                             const Tensor& x);

}  // namespace dtensor::detail
