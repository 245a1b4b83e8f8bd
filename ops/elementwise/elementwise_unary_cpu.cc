// CPU kernels for the unary elementwise ops and activations.
#include <cmath>
#include <type_traits>

#include "ops/common/cpu_loops.h"
#include "ops/elementwise/elementwise_kernels.h"

namespace dtensor::detail {

namespace {

// x ** e for integers by repeated squaring (e >= 0; wraps on overflow like PyTorch's int math).
template <typename C>
C int_pow(C x, int64_t e) {
  using U = std::make_unsigned_t<C>;
  U result = 1;
  U base = static_cast<U>(x);
  while (e > 0) {
    if (e & 1) result *= base;
    base *= base;
    e >>= 1;
  }
  return static_cast<C>(result);
}

template <typename T>
void float_unary(UnaryOp op, const ElementwiseIter& it, const Scalar& param) {
  using C = compute_t<T>;
  switch (op) {
    case UnaryOp::kNeg: return cpu_kernel<T, T>(it, [](C a) -> C { return -a; });
    case UnaryOp::kAbs: return cpu_kernel<T, T>(it, [](C a) -> C { return std::fabs(a); });
    case UnaryOp::kExp: return cpu_kernel<T, T>(it, [](C a) -> C { return std::exp(a); });
    case UnaryOp::kLog: return cpu_kernel<T, T>(it, [](C a) -> C { return std::log(a); });
    case UnaryOp::kSqrt: return cpu_kernel<T, T>(it, [](C a) -> C { return std::sqrt(a); });
    case UnaryOp::kRsqrt:
      return cpu_kernel<T, T>(it, [](C a) -> C { return C(1) / std::sqrt(a); });
    case UnaryOp::kSigmoid:
      return cpu_kernel<T, T>(it, [](C a) -> C { return C(1) / (C(1) + std::exp(-a)); });
    case UnaryOp::kTanh: return cpu_kernel<T, T>(it, [](C a) -> C { return std::tanh(a); });
    case UnaryOp::kRelu:  // written so that NaN passes through
      return cpu_kernel<T, T>(it, [](C a) -> C { return a < C(0) ? C(0) : a; });
    // Both gelus are written without the cancellation of 1 + erf(x) / 1 + tanh(x) at large
    // negative x: 1 + erf(-z) = erfc(z) and 1 + tanh(u) = 2 / (1 + exp(-2u)).
    case UnaryOp::kGelu:
      return cpu_kernel<T, T>(it, [](C a) -> C {
        return C(0.5) * a * std::erfc(-a * C(0.70710678118654752440));
      });
    case UnaryOp::kGeluTanh:
      return cpu_kernel<T, T>(it, [](C a) -> C {
        const C inner = C(0.79788456080286535588) * (a + C(0.044715) * a * a * a);
        return a / (C(1) + std::exp(C(-2) * inner));
      });
    case UnaryOp::kSilu:
      return cpu_kernel<T, T>(it, [](C a) -> C { return a / (C(1) + std::exp(-a)); });
    case UnaryOp::kPow: {
      const C e = param.to<C>();
      if (e == C(2)) return cpu_kernel<T, T>(it, [](C a) -> C { return a * a; });
      if (e == C(1)) return cpu_kernel<T, T>(it, [](C a) -> C { return a; });
      return cpu_kernel<T, T>(it, [e](C a) -> C { return std::pow(a, e); });
    }
  }
}

template <typename T>
void int_unary(UnaryOp op, const ElementwiseIter& it, const Scalar& param) {
  using C = T;
  switch (op) {
    case UnaryOp::kNeg: return cpu_kernel<T, T>(it, [](C a) -> C { return -a; });
    case UnaryOp::kAbs: return cpu_kernel<T, T>(it, [](C a) -> C { return a < 0 ? -a : a; });
    case UnaryOp::kRelu: return cpu_kernel<T, T>(it, [](C a) -> C { return a < 0 ? 0 : a; });
    case UnaryOp::kPow: {
      const int64_t e = param.to_int();
      return cpu_kernel<T, T>(it, [e](C a) -> C { return int_pow(a, e); });
    }
    default: break;
  }
  DT_FAIL("[unary_cpu] op %d not supported for %s", static_cast<int>(op),
          dtype_name(dtype_of_v<T>));
}

}  // namespace

void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& a, const Scalar& param) {
  const ElementwiseIter it(out, {&a});
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      DT_FAIL("[unary_cpu] op %d not supported for bool", static_cast<int>(op));
    } else if constexpr (std::is_integral_v<T>) {
      int_unary<T>(op, it, param);
    } else {
      float_unary<T>(op, it, param);
    }
  });
}

}  // namespace dtensor::detail
