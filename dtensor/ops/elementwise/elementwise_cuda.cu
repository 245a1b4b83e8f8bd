// CUDA kernels for the elementwise ops: the same per-element formulas as elementwise_cpu.cc
// and elementwise_unary_cpu.cc (bf16/fp16 computed in float, rounded once on store).
#include <type_traits>

#include "dtensor/ops/common/detail/loops_cuda.cuh"
#include "dtensor/ops/elementwise/detail/elementwise_cuda.h"
#include "dtensor/ops/elementwise/detail/int_pow.h"
#include "dtensor/ops/elementwise/detail/pointwise_math.h"

namespace dtensor::detail {

namespace {

template <typename C>
__device__ __forceinline__ C max_nan(C a, C b) {
  return (a != a) ? a : ((a > b) ? a : b);
}
template <typename C>
__device__ __forceinline__ C min_nan(C a, C b) {
  return (a != a) ? a : ((a < b) ? a : b);
}
template <typename C>
__device__ __forceinline__ C add_op(C a, C b) {
  if constexpr (std::is_same_v<C, bool>)
    return a || b;
  else
    return a + b;
}
template <typename C>
__device__ __forceinline__ C mul_op(C a, C b) {
  if constexpr (std::is_same_v<C, bool>)
    return a && b;
  else
    return a * b;
}

template <typename T>
void binary_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using C = compute_t<T>;
  const std::initializer_list<const Tensor*> in{&a, &b};
  switch (op) {
    case BinaryOp::kAdd:
      return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return add_op(x, y); });
    case BinaryOp::kSub:
      if constexpr (!std::is_same_v<C, bool>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) -> C { return x - y; });
      }
      break;
    case BinaryOp::kMul:
      return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return mul_op(x, y); });
    case BinaryOp::kDiv:
      if constexpr (std::is_floating_point_v<C>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) -> C { return x / y; });
      }
      break;
    case BinaryOp::kMaximum:
      return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return max_nan(x, y); });
    case BinaryOp::kMinimum:
      return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return min_nan(x, y); });
    case BinaryOp::kPow:
      return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return pow_op(x, y); });
    case BinaryOp::kFmod:
      if constexpr (!std::is_same_v<C, bool>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return fmod_op(x, y); });
      }
      break;
    case BinaryOp::kRemainder:
      if constexpr (!std::is_same_v<C, bool>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return remainder_op(x, y); });
      }
      break;
    case BinaryOp::kAtan2:
      if constexpr (std::is_floating_point_v<C>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return atan2_op(x, y); });
      }
      break;
    case BinaryOp::kHypot:
      if constexpr (std::is_floating_point_v<C>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return hypot_op(x, y); });
      }
      break;
    case BinaryOp::kLogaddexp:
      if constexpr (std::is_floating_point_v<C>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return logaddexp_op(x, y); });
      }
      break;
    case BinaryOp::kXlogy:
      if constexpr (std::is_floating_point_v<C>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return xlogy_op(x, y); });
      }
      break;
    case BinaryOp::kCopysign:
      if constexpr (std::is_floating_point_v<C>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) { return copysign_op(x, y); });
      }
      break;
    case BinaryOp::kSigmoidGate:
      if constexpr (std::is_floating_point_v<C>) {
        return gpu_kernel<T, T, T>(out, in,
                                   [] __device__(C x, C y) { return sigmoid_gate_op(x, y); });
      }
      break;
    case BinaryOp::kBitAnd:
      if constexpr (std::is_integral_v<C>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) -> C { return x & y; });
      }
      break;
    case BinaryOp::kBitOr:
      if constexpr (std::is_integral_v<C>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) -> C { return x | y; });
      }
      break;
    case BinaryOp::kBitXor:
      if constexpr (std::is_integral_v<C>) {
        return gpu_kernel<T, T, T>(out, in, [] __device__(C x, C y) -> C { return x ^ y; });
      }
      break;
  }
  unsupported_op("binary_cuda", op, dtype_of_v<T>);
}

template <typename T>
void binary_scalar_typed(BinaryOp op, const Tensor& out, const Tensor& a, const Scalar& s,
                         bool first) {
  using C = compute_t<T>;
  const C v = s.to<C>();
  const std::initializer_list<const Tensor*> in{&a};
  switch (op) {
    case BinaryOp::kAdd:
      return gpu_kernel<T, T>(out, in, [v] __device__(C x) { return add_op(x, v); });
    case BinaryOp::kSub:
      if constexpr (!std::is_same_v<C, bool>) {
        if (first) return gpu_kernel<T, T>(out, in, [v] __device__(C x) -> C { return v - x; });
        return gpu_kernel<T, T>(out, in, [v] __device__(C x) -> C { return x - v; });
      }
      break;
    case BinaryOp::kMul:
      return gpu_kernel<T, T>(out, in, [v] __device__(C x) { return mul_op(x, v); });
    case BinaryOp::kDiv:
      if constexpr (std::is_floating_point_v<C>) {
        if (first) return gpu_kernel<T, T>(out, in, [v] __device__(C x) -> C { return v / x; });
        return gpu_kernel<T, T>(out, in, [v] __device__(C x) -> C { return x / v; });
      }
      break;
    case BinaryOp::kMaximum:
      return gpu_kernel<T, T>(out, in, [v] __device__(C x) { return max_nan(x, v); });
    case BinaryOp::kMinimum:
      return gpu_kernel<T, T>(out, in, [v] __device__(C x) { return min_nan(x, v); });
    case BinaryOp::kFmod:
      if constexpr (!std::is_same_v<C, bool>) {
        return gpu_kernel<T, T>(out, in, [v] __device__(C x) { return fmod_op(x, v); });
      }
      break;
    case BinaryOp::kRemainder:
      if constexpr (!std::is_same_v<C, bool>) {
        return gpu_kernel<T, T>(out, in, [v] __device__(C x) { return remainder_op(x, v); });
      }
      break;
    default:  // the other ops have no scalar form here (pow: unary kPow)
      break;
  }
  unsupported_op("binary_cuda", op, dtype_of_v<T>);
}

template <typename T>
void compare_typed(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using C = compute_t<T>;
  const std::initializer_list<const Tensor*> in{&a, &b};
  switch (op) {
    case CompareOp::kEq:
      return gpu_kernel<bool, T, T>(out, in, [] __device__(C x, C y) { return x == y; });
    case CompareOp::kNe:
      return gpu_kernel<bool, T, T>(out, in, [] __device__(C x, C y) { return x != y; });
    case CompareOp::kLt:
      return gpu_kernel<bool, T, T>(out, in, [] __device__(C x, C y) { return x < y; });
    case CompareOp::kLe:
      return gpu_kernel<bool, T, T>(out, in, [] __device__(C x, C y) { return x <= y; });
    case CompareOp::kGt:
      return gpu_kernel<bool, T, T>(out, in, [] __device__(C x, C y) { return x > y; });
    case CompareOp::kGe:
      return gpu_kernel<bool, T, T>(out, in, [] __device__(C x, C y) { return x >= y; });
  }
}

template <typename T>
void compare_scalar_typed(CompareOp op, const Tensor& out, const Tensor& a, const Scalar& s) {
  using C = compute_t<T>;
  // A floating scalar is compared as a value of the tensor's dtype (PyTorch: float16 0.1 ==
  // 0.1 is true), not in the wider compute type; integer scalars as they are.
  const C v = is_floating(dtype_of_v<T>) ? static_cast<C>(s.to<T>()) : s.to<C>();
  const std::initializer_list<const Tensor*> in{&a};
  switch (op) {
    case CompareOp::kEq:
      return gpu_kernel<bool, T>(out, in, [v] __device__(C x) { return x == v; });
    case CompareOp::kNe:
      return gpu_kernel<bool, T>(out, in, [v] __device__(C x) { return x != v; });
    case CompareOp::kLt:
      return gpu_kernel<bool, T>(out, in, [v] __device__(C x) { return x < v; });
    case CompareOp::kLe:
      return gpu_kernel<bool, T>(out, in, [v] __device__(C x) { return x <= v; });
    case CompareOp::kGt:
      return gpu_kernel<bool, T>(out, in, [v] __device__(C x) { return x > v; });
    case CompareOp::kGe:
      return gpu_kernel<bool, T>(out, in, [v] __device__(C x) { return x >= v; });
  }
}

template <typename T>
void float_unary(UnaryOp op, const Tensor& out, const Tensor& a, const Scalar& param) {
  using C = compute_t<T>;
  const std::initializer_list<const Tensor*> in{&a};
  switch (op) {
    case UnaryOp::kNeg:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return -x; });
    case UnaryOp::kAbs:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return fabs(x); });
    case UnaryOp::kExp:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return exp(x); });
    case UnaryOp::kLog:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return log(x); });
    case UnaryOp::kSqrt:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return sqrt(x); });
    case UnaryOp::kRsqrt:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return C(1) / sqrt(x); });
    case UnaryOp::kSigmoid:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return C(1) / (C(1) + exp(-x)); });
    case UnaryOp::kTanh:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return tanh(x); });
    case UnaryOp::kRelu:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return x < C(0) ? C(0) : x; });
    case UnaryOp::kGelu:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C {
        return C(0.5) * x * erfc(-x * C(0.70710678118654752440));
      });
    case UnaryOp::kGeluTanh:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C {
        const C inner = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
        return x / (C(1) + exp(C(-2) * inner));
      });
    case UnaryOp::kSilu:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return x / (C(1) + exp(-x)); });
    case UnaryOp::kSin:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return sin(x); });
    case UnaryOp::kCos:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return cos(x); });
    case UnaryOp::kTan:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return tan(x); });
    case UnaryOp::kErf:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return erf(x); });
    case UnaryOp::kErfinv:  // the CUDA math library's (+-inf at +-1, NaN outside [-1, 1])
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return erfinv(x); });
    case UnaryOp::kSinh:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return sinh(x); });
    case UnaryOp::kCosh:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return cosh(x); });
    case UnaryOp::kAsin:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return asin(x); });
    case UnaryOp::kAcos:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return acos(x); });
    case UnaryOp::kAtan:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return atan(x); });
    case UnaryOp::kAsinh:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return asinh(x); });
    case UnaryOp::kAcosh:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return acosh(x); });
    case UnaryOp::kAtanh:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return atanh(x); });
    case UnaryOp::kErfc:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return erfc(x); });
    case UnaryOp::kLogSigmoid:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C {
        return x < C(0) ? x - log1p(exp(x)) : -log1p(exp(-x));
      });
    case UnaryOp::kHardsigmoid:
      return gpu_kernel<T, T>(out, in,
                              [] __device__(C x) -> C { return relu6_of(x + C(3)) / C(6); });
    case UnaryOp::kHardswish:
      return gpu_kernel<T, T>(out, in,
                              [] __device__(C x) -> C { return x * relu6_of(x + C(3)) / C(6); });
    case UnaryOp::kRelu6:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return relu6_of(x); });
    case UnaryOp::kMish:
      return gpu_kernel<T, T>(
          out, in, [] __device__(C x) -> C { return x * tanh(x > C(20) ? x : log1p(exp(x))); });
    case UnaryOp::kSelu:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C {
        return C(1.0507009873554804934) * (x > C(0) ? x : C(1.6732632423543772848) * expm1(x));
      });
    case UnaryOp::kExp2:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return exp2(x); });
    case UnaryOp::kExpm1:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return expm1(x); });
    case UnaryOp::kLog1p:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return log1p(x); });
    case UnaryOp::kLog2:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return log2(x); });
    case UnaryOp::kLog10:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return log10(x); });
    case UnaryOp::kReciprocal:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return C(1) / x; });
    case UnaryOp::kFloor:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return floor(x); });
    case UnaryOp::kCeil:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return ceil(x); });
    case UnaryOp::kRound:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return rint(x); });
    case UnaryOp::kTrunc:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return trunc(x); });
    case UnaryOp::kFrac:
      return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return x - trunc(x); });
    case UnaryOp::kSign:
      return gpu_kernel<T, T>(
          out, in, [] __device__(C x) -> C { return x > C(0) ? C(1) : (x < C(0) ? C(-1) : C(0)); });
    case UnaryOp::kPow: {
      const C e = param.to<C>();
      if (e == C(2)) return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return x * x; });
      if (e == C(1)) return gpu_kernel<T, T>(out, in, [] __device__(C x) -> C { return x; });
      return gpu_kernel<T, T>(out, in, [e] __device__(C x) -> C { return pow(x, e); });
    }
    default:
      break;
  }
  unsupported_op("unary_cuda", op, dtype_of_v<T>);
}

template <typename T>
void int_unary(UnaryOp op, const Tensor& out, const Tensor& a, const Scalar& param) {
  const std::initializer_list<const Tensor*> in{&a};
  switch (op) {
    case UnaryOp::kNeg:
      return gpu_kernel<T, T>(out, in, [] __device__(T x) -> T { return -x; });
    case UnaryOp::kAbs:
      return gpu_kernel<T, T>(out, in, [] __device__(T x) -> T { return x < 0 ? -x : x; });
    case UnaryOp::kRelu:
      return gpu_kernel<T, T>(out, in, [] __device__(T x) -> T { return x < 0 ? 0 : x; });
    case UnaryOp::kRelu6:
      return gpu_kernel<T, T>(out, in, [] __device__(T x) -> T { return relu6_of(x); });
    case UnaryOp::kFloor:  // rounding an integer is the identity
    case UnaryOp::kCeil:
    case UnaryOp::kRound:
    case UnaryOp::kTrunc:
      return gpu_kernel<T, T>(out, in, [] __device__(T x) -> T { return x; });
    case UnaryOp::kSign:
      return gpu_kernel<T, T>(out, in, [] __device__(T x) -> T { return T((x > 0) - (x < 0)); });
    case UnaryOp::kBitNot:
      return gpu_kernel<T, T>(out, in, [] __device__(T x) -> T { return static_cast<T>(~x); });
    case UnaryOp::kPow: {
      const int64_t e = param.to_int();
      return gpu_kernel<T, T>(out, in, [e] __device__(T x) -> T { return int_pow(x, e); });
    }
    default:
      break;
  }
  unsupported_op("unary_cuda", op, dtype_of_v<T>);
}

// The activation gradients of activation_backward_cpu, with the formulas of
// dtensor/ops/common/detail/simd_math-inl.h (1 + erf and 1 + tanh never formed).
template <typename T>
void activation_backward_typed(ActivationGrad op, const Tensor& out, const Tensor& g,
                               const Tensor& x) {
  using C = compute_t<T>;
  const std::initializer_list<const Tensor*> in{&g, &x};
  switch (op) {
    case ActivationGrad::kGelu:
      return gpu_kernel<T, T, T>(out, in, [] __device__(C gv, C v) -> C {
        const C cdf = C(0.5) * erfc(-v * C(0.70710678118654752440));
        const C pdf = C(0.39894228040143267794) * exp(C(-0.5) * v * v);
        return gv * (cdf + v * pdf);
      });
    case ActivationGrad::kGeluTanh:
      return gpu_kernel<T, T, T>(out, in, [] __device__(C gv, C v) -> C {
        const C k = C(0.79788456080286535588);
        const C u = k * (v + C(0.044715) * v * v * v);
        const C s = C(1) / (C(1) + exp(C(-2) * u));  // 0.5 (1 + tanh(u))
        const C du = k * (C(1) + C(3 * 0.044715) * v * v);
        return gv * (s + C(2) * v * s * (C(1) - s) * du);
      });
    case ActivationGrad::kSilu:
      return gpu_kernel<T, T, T>(out, in, [] __device__(C gv, C v) -> C {
        const C s = C(1) / (C(1) + exp(-v));
        return gv * s * (C(1) + v * (C(1) - s));
      });
    case ActivationGrad::kSigmoid:
      return gpu_kernel<T, T, T>(out, in,
                                 [] __device__(C gv, C y) -> C { return gv * y * (C(1) - y); });
    case ActivationGrad::kTanh:
      return gpu_kernel<T, T, T>(out, in,
                                 [] __device__(C gv, C y) -> C { return gv * (C(1) - y * y); });
  }
}

// The activations with parameters of param_activation_cpu (pointwise_math.h), the parameters
// converted to the compute type first.
template <typename T>
void param_activation_typed(ParamActivation op, const Tensor& out, const Tensor& a, double p0,
                            double p1) {
  using C = compute_t<T>;
  const C c0 = static_cast<C>(p0), c1 = static_cast<C>(p1);
  const std::initializer_list<const Tensor*> in{&a};
  switch (op) {
    case ParamActivation::kSoftplus:
      return gpu_kernel<T, T>(out, in,
                              [c0, c1] __device__(C x) -> C { return softplus_op(x, c0, c1); });
    case ParamActivation::kElu:
      return gpu_kernel<T, T>(out, in, [c0, c1] __device__(C x) -> C { return elu_op(x, c0, c1); });
    case ParamActivation::kLeakyRelu:
      return gpu_kernel<T, T>(out, in, [c0] __device__(C x) -> C { return leaky_relu_op(x, c0); });
  }
}

// The replacements as T holds them, as nan_to_num_cpu. (A __device__ lambda may not sit inside
// the generic dispatch lambda, hence a function template.)
template <typename T>
void nan_to_num_typed(const Tensor& out, const Tensor& a, double nan, double posinf,
                      double neginf) {
  using C = compute_t<T>;
  const C n = C(T(C(nan))), p = C(T(C(posinf))), m = C(T(C(neginf)));
  gpu_kernel<T, T>(out, {&a}, [n, p, m] __device__(C x) { return nan_to_num_op(x, n, p, m); });
}

// Element moves by size: where selects stored values, no float round trip.
template <typename U>
__global__ void gpu_where_kernel(std::array<char*, 4> p, OffsetCalc<4> calc, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[4];
    calc.get(i, off);
    const bool c = *reinterpret_cast<const bool*>(p[1] + off[1]);
    *reinterpret_cast<U*>(p[0] + off[0]) =
        *reinterpret_cast<const U*>(c ? p[2] + off[2] : p[3] + off[3]);
  }
}

template <typename U>
void where_typed(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  cuda::DeviceGuard guard(out.device().index);
  const EwOperands<4> o = make_ew_operands<4>(out, {&cond, &a, &b});
  gpu_where_kernel<U><<<cuda::grid_for(o.numel, kEwBlock), kEwBlock, 0, cuda::current_stream()>>>(
      o.ptrs, o.calc, o.numel);
  DT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_dtype(out.dtype(), [&]<typename T>() { binary_typed<T>(op, out, a, b); });
}

void binary_scalar_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Scalar& s,
                        bool scalar_first) {
  dispatch_dtype(out.dtype(),
                 [&]<typename T>() { binary_scalar_typed<T>(op, out, a, s, scalar_first); });
}

void compare_cuda(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_dtype(a.dtype(), [&]<typename T>() { compare_typed<T>(op, out, a, b); });
}

void compare_scalar_cuda(CompareOp op, const Tensor& out, const Tensor& a, const Scalar& s) {
  dispatch_dtype(a.dtype(), [&]<typename T>() { compare_scalar_typed<T>(op, out, a, s); });
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& a, const Scalar& param) {
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      unsupported_op("unary_cuda", op, kBool);
    } else if constexpr (std::is_integral_v<T>) {
      int_unary<T>(op, out, a, param);
    } else {
      float_unary<T>(op, out, a, param);
    }
  });
}

void activation_backward_cuda(ActivationGrad op, const Tensor& out, const Tensor& grad,
                              const Tensor& x) {
  dispatch_floating(out.dtype(), "activation_backward_cuda",
                    [&]<typename T>() { activation_backward_typed<T>(op, out, grad, x); });
}

void param_activation_cuda(ParamActivation op, const Tensor& out, const Tensor& a, double p0,
                           double p1) {
  dispatch_floating(out.dtype(), "param_activation_cuda",
                    [&]<typename T>() { param_activation_typed<T>(op, out, a, p0, p1); });
}

void nan_to_num_cuda(const Tensor& out, const Tensor& a, double nan, double posinf, double neginf) {
  dispatch_floating(out.dtype(), "nan_to_num",
                    [&]<typename T>() { nan_to_num_typed<T>(out, a, nan, posinf, neginf); });
}

void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  switch (out.itemsize()) {
    case 1:
      return where_typed<uint8_t>(out, cond, a, b);
    case 2:
      return where_typed<uint16_t>(out, cond, a, b);
    case 4:
      return where_typed<uint32_t>(out, cond, a, b);
    default:
      return where_typed<uint64_t>(out, cond, a, b);
  }
}

}  // namespace dtensor::detail
