// CPU kernels for the binary elementwise ops, comparisons and where.
#include <type_traits>

#include "dtensor/ops/common/detail/cpu_loops.h"
#include "dtensor/ops/elementwise/detail/elementwise_kernels.h"
#include "dtensor/ops/elementwise/detail/pointwise_math.h"

namespace dtensor::detail {

namespace {

// NaN-propagating max/min (a != a only for NaN; the test folds away for integers).
template <typename C>
DT_FORCE_INLINE C max_nan(C a, C b) {
  return (a != a) ? a : ((a > b) ? a : b);
}
template <typename C>
DT_FORCE_INLINE C min_nan(C a, C b) {
  return (a != a) ? a : ((a < b) ? a : b);
}

// Bool add is logical or, bool mul logical and (PyTorch).
template <typename C>
DT_FORCE_INLINE C add_op(C a, C b) {
  if constexpr (std::is_same_v<C, bool>)
    return a || b;
  else
    return a + b;
}
template <typename C>
DT_FORCE_INLINE C mul_op(C a, C b) {
  if constexpr (std::is_same_v<C, bool>)
    return a && b;
  else
    return a * b;
}

template <typename T>
void binary_typed(BinaryOp op, const ElementwiseIter& it) {
  using C = compute_t<T>;
  switch (op) {
    case BinaryOp::kAdd:
      return cpu_kernel<T, T, T>(it, [](C a, C b) { return add_op(a, b); });
    case BinaryOp::kSub:
      return cpu_kernel<T, T, T>(it, [](C a, C b) -> C { return a - b; });
    case BinaryOp::kMul:
      return cpu_kernel<T, T, T>(it, [](C a, C b) { return mul_op(a, b); });
    case BinaryOp::kDiv:
      if constexpr (std::is_floating_point_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) -> C { return a / b; });
      }
      break;
    case BinaryOp::kMaximum:
      return cpu_kernel<T, T, T>(it, [](C a, C b) { return max_nan(a, b); });
    case BinaryOp::kMinimum:
      return cpu_kernel<T, T, T>(it, [](C a, C b) { return min_nan(a, b); });
    case BinaryOp::kPow:
      return cpu_kernel<T, T, T>(it, [](C a, C b) { return pow_op(a, b); });
    case BinaryOp::kFmod:
      if constexpr (!std::is_same_v<C, bool>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) { return fmod_op(a, b); });
      }
      break;
    case BinaryOp::kRemainder:
      if constexpr (!std::is_same_v<C, bool>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) { return remainder_op(a, b); });
      }
      break;
    case BinaryOp::kAtan2:
      if constexpr (std::is_floating_point_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) { return atan2_op(a, b); });
      }
      break;
    case BinaryOp::kHypot:
      if constexpr (std::is_floating_point_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) { return hypot_op(a, b); });
      }
      break;
    case BinaryOp::kLogaddexp:
      if constexpr (std::is_floating_point_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) { return logaddexp_op(a, b); });
      }
      break;
    case BinaryOp::kXlogy:
      if constexpr (std::is_floating_point_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) { return xlogy_op(a, b); });
      }
      break;
    case BinaryOp::kCopysign:
      if constexpr (std::is_floating_point_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) { return copysign_op(a, b); });
      }
      break;
    case BinaryOp::kSigmoidGate:
      if constexpr (std::is_floating_point_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) { return sigmoid_gate_op(a, b); });
      }
      break;
    case BinaryOp::kBitAnd:
      if constexpr (std::is_integral_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) -> C { return a & b; });
      }
      break;
    case BinaryOp::kBitOr:
      if constexpr (std::is_integral_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) -> C { return a | b; });
      }
      break;
    case BinaryOp::kBitXor:
      if constexpr (std::is_integral_v<C>) {
        return cpu_kernel<T, T, T>(it, [](C a, C b) -> C { return a ^ b; });
      }
      break;
  }
  unsupported_op("binary_cpu", op, dtype_of_v<T>);
}

template <typename T>
void binary_scalar_typed(BinaryOp op, const ElementwiseIter& it, const Scalar& s,
                         bool scalar_first) {
  using C = compute_t<T>;
  const C v = s.to<C>();
  switch (op) {
    case BinaryOp::kAdd:
      return cpu_kernel<T, T>(it, [v](C a) { return add_op(a, v); });
    case BinaryOp::kSub:
      if (scalar_first) return cpu_kernel<T, T>(it, [v](C a) -> C { return v - a; });
      return cpu_kernel<T, T>(it, [v](C a) -> C { return a - v; });
    case BinaryOp::kMul:
      return cpu_kernel<T, T>(it, [v](C a) { return mul_op(a, v); });
    case BinaryOp::kDiv:
      if constexpr (std::is_floating_point_v<C>) {
        if (scalar_first) return cpu_kernel<T, T>(it, [v](C a) -> C { return v / a; });
        return cpu_kernel<T, T>(it, [v](C a) -> C { return a / v; });
      }
      break;
    case BinaryOp::kMaximum:
      return cpu_kernel<T, T>(it, [v](C a) { return max_nan(a, v); });
    case BinaryOp::kMinimum:
      return cpu_kernel<T, T>(it, [v](C a) { return min_nan(a, v); });
    case BinaryOp::kFmod:
      if constexpr (!std::is_same_v<C, bool>) {
        return cpu_kernel<T, T>(it, [v](C a) { return fmod_op(a, v); });
      }
      break;
    case BinaryOp::kRemainder:
      if constexpr (!std::is_same_v<C, bool>) {
        return cpu_kernel<T, T>(it, [v](C a) { return remainder_op(a, v); });
      }
      break;
    default:  // the other ops have no scalar form here (pow: unary kPow)
      break;
  }
  unsupported_op("binary_cpu", op, dtype_of_v<T>);
}

template <typename T>
void compare_typed(CompareOp op, const ElementwiseIter& it) {
  using C = compute_t<T>;
  switch (op) {
    case CompareOp::kEq:
      return cpu_kernel<bool, T, T>(it, [](C a, C b) { return a == b; });
    case CompareOp::kNe:
      return cpu_kernel<bool, T, T>(it, [](C a, C b) { return a != b; });
    case CompareOp::kLt:
      return cpu_kernel<bool, T, T>(it, [](C a, C b) { return a < b; });
    case CompareOp::kLe:
      return cpu_kernel<bool, T, T>(it, [](C a, C b) { return a <= b; });
    case CompareOp::kGt:
      return cpu_kernel<bool, T, T>(it, [](C a, C b) { return a > b; });
    case CompareOp::kGe:
      return cpu_kernel<bool, T, T>(it, [](C a, C b) { return a >= b; });
  }
}

template <typename T>
void compare_scalar_typed(CompareOp op, const ElementwiseIter& it, const Scalar& s) {
  using C = compute_t<T>;
  // A floating scalar is compared as a value of the tensor's dtype (PyTorch: float16 0.1 ==
  // 0.1 is true), not in the wider compute type; integer scalars as they are.
  const C v = is_floating(dtype_of_v<T>) ? static_cast<C>(s.to<T>()) : s.to<C>();
  switch (op) {
    case CompareOp::kEq:
      return cpu_kernel<bool, T>(it, [v](C a) { return a == v; });
    case CompareOp::kNe:
      return cpu_kernel<bool, T>(it, [v](C a) { return a != v; });
    case CompareOp::kLt:
      return cpu_kernel<bool, T>(it, [v](C a) { return a < v; });
    case CompareOp::kLe:
      return cpu_kernel<bool, T>(it, [v](C a) { return a <= v; });
    case CompareOp::kGt:
      return cpu_kernel<bool, T>(it, [v](C a) { return a > v; });
    case CompareOp::kGe:
      return cpu_kernel<bool, T>(it, [v](C a) { return a >= v; });
  }
}

}  // namespace

void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const ElementwiseIter it(out, {&a, &b});
  dispatch_dtype(out.dtype(), [&]<typename T>() { binary_typed<T>(op, it); });
}

void binary_scalar_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Scalar& s,
                       bool scalar_first) {
  const ElementwiseIter it(out, {&a});
  dispatch_dtype(out.dtype(),
                 [&]<typename T>() { binary_scalar_typed<T>(op, it, s, scalar_first); });
}

void compare_cpu(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const ElementwiseIter it(out, {&a, &b});
  dispatch_dtype(a.dtype(), [&]<typename T>() { compare_typed<T>(op, it); });
}

void compare_scalar_cpu(CompareOp op, const Tensor& out, const Tensor& a, const Scalar& s) {
  const ElementwiseIter it(out, {&a});
  dispatch_dtype(a.dtype(), [&]<typename T>() { compare_scalar_typed<T>(op, it, s); });
}

void nan_to_num_cpu(const Tensor& out, const Tensor& a, double nan, double posinf, double neginf) {
  const ElementwiseIter it(out, {&a});
  dispatch_floating(out.dtype(), "nan_to_num", [&]<typename T>() {
    using C = compute_t<T>;
    // The replacements as T holds them (a float16 posinf of 1e30 becomes inf, as PyTorch).
    const C n = C(T(C(nan))), p = C(T(C(posinf))), m = C(T(C(neginf)));
    cpu_kernel<T, T>(it, [n, p, m](C x) { return nan_to_num_op(x, n, p, m); });
  });
}

void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const ElementwiseIter it(out, {&cond, &a, &b});
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    // Elements are moved, not computed: select the stored values without a float round trip.
    it.for_each([](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const bool c = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
        *reinterpret_cast<T*>(p[0] + i * s[0]) =
            *reinterpret_cast<const T*>(c ? p[2] + i * s[2] : p[3] + i * s[3]);
      }
    });
  });
}

}  // namespace dtensor::detail
