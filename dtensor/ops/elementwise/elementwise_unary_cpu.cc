// CPU kernels for the unary elementwise ops, the activations and the activations' backward.
//
// exp, log, tanh, sigmoid, gelu (both forms), silu and the backward kernels are vectorised with
// Google Highway (dtensor/ops/common/detail/simd_math-inl.h), compiled for each target of
// dtensor/ops/common/detail/simd_config.h and dispatched at run time. Rows the iterator hands over
// with a stride are gathered into short contiguous chunks first, so every layout runs the same
// vector code and gives the same values. The cheap ops (neg, abs, sqrt, rsqrt, relu, relu6, pow)
// stay plain loops the compiler vectorises; the other math and activations (softplus, elu,
// leaky_relu included) are libm per element.
#include <cmath>
#include <type_traits>

#include "dtensor/ops/common/detail/cpu_loops.h"
#include "dtensor/ops/elementwise/detail/elementwise_kernels.h"
#include "dtensor/ops/elementwise/detail/erfinv.h"
#include "dtensor/ops/elementwise/detail/int_pow.h"
#include "dtensor/ops/elementwise/detail/pointwise_math.h"

#define HWY_TARGET_INCLUDE "dtensor/ops/elementwise/elementwise_unary_cpu.cc"
#include "dtensor/ops/common/detail/simd_kernel-inl.h"  // IWYU pragma: keep

HWY_BEFORE_NAMESPACE();
namespace dtensor::detail::HWY_NAMESPACE {
namespace {

// Elements gathered at a time from a strided row.
constexpr int64_t kChunk = 256;

template <typename T>
void UnaryRow(UnaryOp op, const T* in, T* out, int64_t n) {
  using V = hn::Vec<ComputeTag<T>>;
  switch (op) {
    case UnaryOp::kExp:
      return MapRow(
          out, n, [](auto d, V x) { return ExpC(d, x); }, in);
    case UnaryOp::kLog:
      return MapRow(
          out, n, [](auto d, V x) { return LogC(d, x); }, in);
    case UnaryOp::kTanh:
      return MapRow(
          out, n, [](auto d, V x) { return TanhC(d, x); }, in);
    case UnaryOp::kSigmoid:
      return MapRow(
          out, n, [](auto d, V x) { return SigmoidC(d, x); }, in);
    case UnaryOp::kSilu:
      return MapRow(
          out, n, [](auto d, V x) { return SiluC(d, x); }, in);
    case UnaryOp::kGelu:
      return MapRow(
          out, n, [](auto d, V x) { return GeluErfC(d, x); }, in);
    case UnaryOp::kGeluTanh:
      return MapRow(
          out, n, [](auto d, V x) { return GeluTanhC(d, x); }, in);
    default:
      break;
  }
  DT_FAIL("[unary_cpu] op %d is not vectorised", static_cast<int>(op));
}

// grad * f'(x) for gelu / silu; grad * out (1 - out) for sigmoid, grad * (1 - out^2) for tanh.
template <typename T>
void ActivationGradRow(ActivationGrad op, const T* g, const T* x, T* out, int64_t n) {
  using V = hn::Vec<ComputeTag<T>>;
  switch (op) {
    case ActivationGrad::kGelu:
      return MapRow(
          out, n, [](auto d, V gv, V xv) { return hn::Mul(gv, GeluErfGradC(d, xv)); }, g, x);
    case ActivationGrad::kGeluTanh:
      return MapRow(
          out, n, [](auto d, V gv, V xv) { return hn::Mul(gv, GeluTanhGradC(d, xv)); }, g, x);
    case ActivationGrad::kSilu:
      return MapRow(
          out, n, [](auto d, V gv, V xv) { return hn::Mul(gv, SiluGradC(d, xv)); }, g, x);
    case ActivationGrad::kSigmoid:
      return MapRow(
          out, n,
          [](auto d, V gv, V yv) {
            return hn::Mul(hn::Mul(gv, yv), hn::Sub(hn::Set(d, hn::TFromD<decltype(d)>(1)), yv));
          },
          g, x);
    case ActivationGrad::kTanh:
      return MapRow(
          out, n,
          [](auto d, V gv, V yv) {
            return hn::Mul(gv, hn::NegMulAdd(yv, yv, hn::Set(d, hn::TFromD<decltype(d)>(1))));
          },
          g, x);
  }
}

// Runs row(in_ptrs..., out, len) on contiguous data: directly when every stride is the element
// size, else on chunks gathered into (and scattered from) local buffers.
template <typename T, int kIn, class Row>
void StridedRow(const char* const (&in)[kIn], const int64_t (&in_stride)[kIn], char* out,
                int64_t out_stride, int64_t n, const Row& row) {
  constexpr int64_t kSize = static_cast<int64_t>(sizeof(T));
  bool contiguous = out_stride == kSize;
  for (int k = 0; k < kIn; ++k) contiguous = contiguous && in_stride[k] == kSize;
  if (contiguous) {
    if constexpr (kIn == 1) {
      row(reinterpret_cast<const T*>(in[0]), reinterpret_cast<T*>(out), n);
    } else {
      row(reinterpret_cast<const T*>(in[0]), reinterpret_cast<const T*>(in[1]),
          reinterpret_cast<T*>(out), n);
    }
    return;
  }
  T a[kIn][kChunk], b[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t len = n - i0 < kChunk ? n - i0 : kChunk;
    for (int k = 0; k < kIn; ++k) {
      for (int64_t i = 0; i < len; ++i) {
        a[k][i] = *reinterpret_cast<const T*>(in[k] + (i0 + i) * in_stride[k]);
      }
    }
    if constexpr (kIn == 1) {
      row(a[0], b, len);
    } else {
      row(a[0], a[1], b, len);
    }
    for (int64_t i = 0; i < len; ++i) *reinterpret_cast<T*>(out + (i0 + i) * out_stride) = b[i];
  }
}

}  // namespace

// Entry points of this target (exported below): one row of n elements of floating dtype dt,
// strides in bytes; out may alias an input exactly.
void UnaryFloatRow(UnaryOp op, DType dt, const char* in, int64_t in_stride, char* out,
                   int64_t out_stride, int64_t n) {
  dispatch_floating(dt, "unary_cpu", [&]<typename T>() {
    const char* ins[1] = {in};
    const int64_t strides[1] = {in_stride};
    StridedRow<T>(ins, strides, out, out_stride, n,
                  [&](const T* a, T* o, int64_t len) { UnaryRow(op, a, o, len); });
  });
}

void ActivationGradFloatRow(ActivationGrad op, DType dt, const char* g, int64_t g_stride,
                            const char* x, int64_t x_stride, char* out, int64_t out_stride,
                            int64_t n) {
  dispatch_floating(dt, "activation_backward_cpu", [&]<typename T>() {
    const char* ins[2] = {g, x};
    const int64_t strides[2] = {g_stride, x_stride};
    StridedRow<T>(ins, strides, out, out_stride, n, [&](const T* a, const T* b, T* o, int64_t len) {
      ActivationGradRow(op, a, b, o, len);
    });
  });
}

}  // namespace dtensor::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dtensor::detail {

HWY_EXPORT(UnaryFloatRow);
HWY_EXPORT(ActivationGradFloatRow);

namespace {

bool is_vectorised(UnaryOp op) {
  switch (op) {
    case UnaryOp::kExp:
    case UnaryOp::kLog:
    case UnaryOp::kTanh:
    case UnaryOp::kSigmoid:
    case UnaryOp::kSilu:
    case UnaryOp::kGelu:
    case UnaryOp::kGeluTanh:
      return true;
    default:
      return false;
  }
}

template <typename T>
void float_unary(UnaryOp op, const ElementwiseIter& it, const Scalar& param) {
  using C = compute_t<T>;
  if (is_vectorised(op)) {
    const DType dt = dtype_of_v<T>;
    it.for_each([&](char* const* p, const int64_t* s, int64_t n) {
      HWY_DYNAMIC_DISPATCH(UnaryFloatRow)(op, dt, p[1], s[1], p[0], s[0], n);
    });
    return;
  }
  switch (op) {
    case UnaryOp::kNeg:
      return cpu_kernel<T, T>(it, [](C a) -> C { return -a; });
    case UnaryOp::kAbs:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::fabs(a); });
    case UnaryOp::kSqrt:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::sqrt(a); });
    case UnaryOp::kRsqrt:
      return cpu_kernel<T, T>(it, [](C a) -> C { return C(1) / std::sqrt(a); });
    case UnaryOp::kRelu:  // written so that NaN passes through
      return cpu_kernel<T, T>(it, [](C a) -> C { return a < C(0) ? C(0) : a; });
    // Not vectorised yet: libm per element (round: half to even under the default rounding
    // mode, as PyTorch; sign(NaN) = 0, as PyTorch).
    case UnaryOp::kSin:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::sin(a); });
    case UnaryOp::kCos:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::cos(a); });
    case UnaryOp::kTan:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::tan(a); });
    case UnaryOp::kErf:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::erf(a); });
    case UnaryOp::kErfinv:
      return cpu_kernel<T, T>(it, [](C a) -> C { return erfinv_host(a); });
    case UnaryOp::kSinh:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::sinh(a); });
    case UnaryOp::kCosh:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::cosh(a); });
    case UnaryOp::kAsin:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::asin(a); });
    case UnaryOp::kAcos:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::acos(a); });
    case UnaryOp::kAtan:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::atan(a); });
    case UnaryOp::kAsinh:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::asinh(a); });
    case UnaryOp::kAcosh:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::acosh(a); });
    case UnaryOp::kAtanh:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::atanh(a); });
    case UnaryOp::kErfc:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::erfc(a); });
    case UnaryOp::kLogSigmoid:
      return cpu_kernel<T, T>(it, [](C a) -> C {
        return a < C(0) ? a - std::log1p(std::exp(a)) : -std::log1p(std::exp(-a));
      });
    case UnaryOp::kHardsigmoid:
      return cpu_kernel<T, T>(it, [](C a) -> C { return relu6_of(a + C(3)) / C(6); });
    case UnaryOp::kHardswish:
      return cpu_kernel<T, T>(it, [](C a) -> C { return a * relu6_of(a + C(3)) / C(6); });
    case UnaryOp::kRelu6:
      return cpu_kernel<T, T>(it, [](C a) -> C { return relu6_of(a); });
    case UnaryOp::kMish:
      return cpu_kernel<T, T>(
          it, [](C a) -> C { return a * std::tanh(a > C(20) ? a : std::log1p(std::exp(a))); });
    case UnaryOp::kSelu:
      return cpu_kernel<T, T>(it, [](C a) -> C {
        return C(1.0507009873554804934) * (a > C(0) ? a : C(1.6732632423543772848) * std::expm1(a));
      });
    case UnaryOp::kExp2:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::exp2(a); });
    case UnaryOp::kExpm1:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::expm1(a); });
    case UnaryOp::kLog1p:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::log1p(a); });
    case UnaryOp::kLog2:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::log2(a); });
    case UnaryOp::kLog10:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::log10(a); });
    case UnaryOp::kReciprocal:
      return cpu_kernel<T, T>(it, [](C a) -> C { return C(1) / a; });
    case UnaryOp::kFloor:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::floor(a); });
    case UnaryOp::kCeil:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::ceil(a); });
    case UnaryOp::kRound:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::nearbyint(a); });
    case UnaryOp::kTrunc:
      return cpu_kernel<T, T>(it, [](C a) -> C { return std::trunc(a); });
    case UnaryOp::kFrac:
      return cpu_kernel<T, T>(it, [](C a) -> C { return a - std::trunc(a); });
    case UnaryOp::kSign:
      return cpu_kernel<T, T>(it,
                              [](C a) -> C { return a > C(0) ? C(1) : (a < C(0) ? C(-1) : C(0)); });
    case UnaryOp::kPow: {
      const C e = param.to<C>();
      if (e == C(2)) return cpu_kernel<T, T>(it, [](C a) -> C { return a * a; });
      if (e == C(1)) return cpu_kernel<T, T>(it, [](C a) -> C { return a; });
      return cpu_kernel<T, T>(it, [e](C a) -> C { return std::pow(a, e); });
    }
    default:
      break;
  }
  unsupported_op("unary_cpu", op, dtype_of_v<T>);
}

template <typename T>
void int_unary(UnaryOp op, const ElementwiseIter& it, const Scalar& param) {
  using C = T;
  switch (op) {
    case UnaryOp::kNeg:
      return cpu_kernel<T, T>(it, [](C a) -> C { return -a; });
    case UnaryOp::kAbs:
      return cpu_kernel<T, T>(it, [](C a) -> C { return a < 0 ? -a : a; });
    case UnaryOp::kRelu:
      return cpu_kernel<T, T>(it, [](C a) -> C { return a < 0 ? 0 : a; });
    case UnaryOp::kRelu6:
      return cpu_kernel<T, T>(it, [](C a) -> C { return relu6_of(a); });
    case UnaryOp::kFloor:  // rounding an integer is the identity
    case UnaryOp::kCeil:
    case UnaryOp::kRound:
    case UnaryOp::kTrunc:
      return cpu_kernel<T, T>(it, [](C a) -> C { return a; });
    case UnaryOp::kSign:
      return cpu_kernel<T, T>(it, [](C a) -> C { return C((a > 0) - (a < 0)); });
    case UnaryOp::kBitNot:
      return cpu_kernel<T, T>(it, [](C a) -> C { return static_cast<C>(~a); });
    case UnaryOp::kPow: {
      const int64_t e = param.to_int();
      return cpu_kernel<T, T>(it, [e](C a) -> C { return int_pow(a, e); });
    }
    default:
      break;
  }
  unsupported_op("unary_cpu", op, dtype_of_v<T>);
}

}  // namespace

void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& a, const Scalar& param) {
  const ElementwiseIter it(out, {&a});
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      unsupported_op("unary_cpu", op, kBool);
    } else if constexpr (std::is_integral_v<T>) {
      int_unary<T>(op, it, param);
    } else {
      float_unary<T>(op, it, param);
    }
  });
}

// The activations with parameters: plain loops over the formulas of pointwise_math.h (not
// vectorised yet, like the other activations of the "more math" group).
void param_activation_cpu(ParamActivation op, const Tensor& out, const Tensor& a, double p0,
                          double p1) {
  const ElementwiseIter it(out, {&a});
  dispatch_floating(out.dtype(), "param_activation_cpu", [&]<typename T>() {
    using C = compute_t<T>;
    const C c0 = static_cast<C>(p0), c1 = static_cast<C>(p1);
    switch (op) {
      case ParamActivation::kSoftplus:
        return cpu_kernel<T, T>(it, [c0, c1](C x) { return softplus_op(x, c0, c1); });
      case ParamActivation::kElu:
        return cpu_kernel<T, T>(it, [c0, c1](C x) { return elu_op(x, c0, c1); });
      case ParamActivation::kLeakyRelu:
        return cpu_kernel<T, T>(it, [c0](C x) { return leaky_relu_op(x, c0); });
    }
  });
}

void activation_backward_cpu(ActivationGrad op, const Tensor& out, const Tensor& grad,
                             const Tensor& x) {
  const ElementwiseIter it(out, {&grad, &x});
  const DType dt = out.dtype();
  it.for_each([&](char* const* p, const int64_t* s, int64_t n) {
    HWY_DYNAMIC_DISPATCH(ActivationGradFloatRow)(op, dt, p[1], s[1], p[2], s[2], p[0], s[0], n);
  });
}

}  // namespace dtensor::detail
#endif  // HWY_ONCE
