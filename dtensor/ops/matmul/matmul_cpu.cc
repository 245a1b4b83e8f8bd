// CPU matrix products: BLAS (OpenBLAS, oneDNN for bfloat16) and the integer loops, under
// detail::gemm_cpu; the checks and the CPU / CUDA switch are in matmul.cc.
#include "dtensor/ops/matmul/detail/matmul_cpu.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "dtensor/ops/common/detail/gemm.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/detail/blas_layout.h"
#include "dtensor/ops/matmul/detail/onednn.h"
#include "dtensor/ops/matmul/detail/openblas.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {

namespace {

using detail::MatLayout;
using detail::matrix_layout;

void check_blas_size(int64_t v, const char* what) {
  DT_CHECK(v <= std::numeric_limits<blasint>::max(),
           "[matmul] %s = %d exceeds the BLAS integer range", what, v);
}

template <typename T>
void blas_gemm(const MatLayout& la, const MatLayout& lb, int64_t n, int64_t m, int64_t k, T alpha,
               const T* a, const T* b, T beta, T* c) {
  check_blas_size(std::max({n, m, k}), "a matrix size");
  check_blas_size(std::max(la.ld, lb.ld), "a leading dimension");
  const auto ta = la.trans ? CblasTrans : CblasNoTrans;
  const auto tb = lb.trans ? CblasTrans : CblasNoTrans;
  const auto ldc = static_cast<blasint>(std::max<int64_t>(1, m));
  const detail::OpenBlas& blas = detail::openblas();
  if (n == 1 && m > 1 && k > 0) {
    // One row of C (a decode step's projections: x [1, K] @ W^T): a matrix-vector product. The
    // GEMM path packs the whole of B on every call (OpenBLAS 0.3.21 has no GEMM -> GEMV
    // forwarding); ?gemv reads B once: 3-7x faster from B of ~1 MB up, the same below
    // (benchmarks/models/RESULTS.md). c = op(B)^T a, op(B) = B [k, m] (Trans on its rows) or
    // B^T stored [m, k] (NoTrans); a's k elements are contiguous, or strided by la.ld when A is
    // stored transposed.
    const auto tv = lb.trans ? CblasNoTrans : CblasTrans;
    const auto rows = static_cast<blasint>(lb.trans ? m : k);
    const auto cols = static_cast<blasint>(lb.trans ? k : m);
    const auto inc = static_cast<blasint>(la.trans ? la.ld : 1);
    // c may be uninitialised memory (empty()) when beta is 0: OpenBLAS from 0.3.27 on scales y
    // by beta with NaN propagation, so garbage NaNs would survive beta = 0.
    if (beta == T(0)) std::fill(c, c + m, T(0));
    if constexpr (std::is_same_v<T, float>) {
      blas.sgemv(CblasRowMajor, tv, rows, cols, alpha, b, static_cast<blasint>(lb.ld), a, inc, beta,
                 c, 1);
    } else {
      blas.dgemv(CblasRowMajor, tv, rows, cols, alpha, b, static_cast<blasint>(lb.ld), a, inc, beta,
                 c, 1);
    }
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    blas.sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(n), static_cast<blasint>(m),
               static_cast<blasint>(k), alpha, a, static_cast<blasint>(la.ld), b,
               static_cast<blasint>(lb.ld), beta, c, ldc);
  } else {
    blas.dgemm(CblasRowMajor, ta, tb, static_cast<blasint>(n), static_cast<blasint>(m),
               static_cast<blasint>(k), alpha, a, static_cast<blasint>(la.ld), b,
               static_cast<blasint>(lb.ld), beta, c, ldc);
  }
}

// Integer GEMM on arbitrary strides; wraps on overflow like PyTorch (unsigned arithmetic).
template <typename T>
void int_gemm(int64_t n, int64_t m, int64_t k, T alpha, const T* a, int64_t sar, int64_t sac,
              const T* b, int64_t sbr, int64_t sbc, T beta, T* c) {
  std::vector<uint64_t> acc(static_cast<size_t>(m));
  for (int64_t i = 0; i < n; ++i) {
    std::fill(acc.begin(), acc.end(), 0);
    for (int64_t p = 0; p < k; ++p) {
      const auto av = static_cast<uint64_t>(static_cast<int64_t>(a[i * sar + p * sac]));
      const T* brow = b + p * sbr;
      for (int64_t j = 0; j < m; ++j) {
        acc[j] += av * static_cast<uint64_t>(static_cast<int64_t>(brow[j * sbc]));
      }
    }
    T* crow = c + i * m;
    const auto ua = static_cast<uint64_t>(static_cast<int64_t>(alpha));
    const auto ub = static_cast<uint64_t>(static_cast<int64_t>(beta));
    for (int64_t j = 0; j < m; ++j) {
      uint64_t v = ua * acc[j];
      if (beta != 0) v += ub * static_cast<uint64_t>(static_cast<int64_t>(crow[j]));
      crow[j] = static_cast<T>(static_cast<int64_t>(v));
    }
  }
}

// out = alpha * a @ b + beta * out over the batch dims. a[..., n, k] and b[..., k, m] have the
// batch sizes of out (strides may be 0); out is contiguous [..., n, m]; beta == 0 means out is
// only written. T is float, double, int32_t or int64_t; In is T, or BFloat16 with T float (oneDNN).
template <typename T, typename In = T>
void gemm_batched(const Tensor& a, const Tensor& b, Tensor& out, T alpha, T beta) {
  const int64_t nb = out.dim() - 2;
  const int64_t n = out.size(-2), m = out.size(-1), k = a.size(-1);
  T* c = out.data<T>();
  if (k == 0) {
    for (int64_t i = 0; i < out.numel(); ++i) c[i] = beta == T(0) ? T(0) : T(beta * c[i]);
    return;
  }
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  int64_t batches = 1;
  for (int64_t d = 0; d < nb; ++d) batches *= out.size(d);
  MatLayout la, lb;
  if constexpr (std::is_floating_point_v<T>) {
    la = matrix_layout(a);
    lb = matrix_layout(b);
    DT_CHECK(la.ok && lb.ok, "[matmul] internal error: operand layout not BLAS-compatible");
  }
  std::optional<detail::OnednnBf16Gemm> onednn;  // built once, run per batch
  if constexpr (!std::is_same_v<In, T>) {
    onednn.emplace(n, m, k, la.trans, la.ld, lb.trans, lb.ld, alpha, beta);
  }
  detail::BatchWalk walk(a, b, out, nb);
  for (int64_t bi = 0; bi < batches; ++bi, walk.next()) {
    const int64_t off_a = walk.a_offset(), off_b = walk.b_offset();
    T* pc = c + bi * n * m;
    if constexpr (!std::is_same_v<In, T>) {
      onednn->run(pa + off_a, pb + off_b, pc);
    } else if constexpr (std::is_floating_point_v<T>) {
      blas_gemm<T>(la, lb, n, m, k, alpha, pa + off_a, pb + off_b, beta, pc);
    } else {
      int_gemm<T>(n, m, k, alpha, pa + off_a, a.stride(-2), a.stride(-1), pb + off_b, b.stride(-2),
                  b.stride(-1), beta, pc);
    }
  }
}

}  // namespace

namespace detail {

// 16-bit floats become float32 (bfloat16 stays as it is where oneDNN runs it: onednn.h); a float
// operand whose last two dims BLAS cannot read is made contiguous. Done before any batch
// expansion so that broadcast operands are never copied.
Tensor prepare_gemm_operand(const Tensor& x) {
  if (x.device().is_cuda()) {  // cuBLAS takes 16-bit operands as they are
    return x.dim() >= 2 && !matrix_layout(x).ok ? x.contiguous() : x;
  }
  const bool onednn = x.dtype() == kBFloat16 && bf16_gemm_backend() == Bf16Gemm::kOnednn;
  Tensor y = is_reduced_float(x.dtype()) && !onednn ? x.to(kFloat32) : x;
  if ((y.dtype() == kFloat32 || y.dtype() == kFloat64 || onednn) && y.dim() >= 2 &&
      !matrix_layout(y).ok) {
    y = y.contiguous();
  }
  return y;
}

Tensor gemm_cpu(const Tensor& a, const Tensor& b, DType dtype, IntSpan out_shape,
                const Tensor* bias, const Scalar& alpha, const Scalar& beta) {
  // Compute dtype: float32 for 16-bit inputs (widened by prepare_gemm_operand, or bfloat16 for
  // oneDNN).
  const bool onednn = a.dtype() == kBFloat16;
  DT_CHECK(b.dtype() == a.dtype(), "[matmul] internal error: prepared operands differ in dtype");
  const DType cdt = onednn ? kFloat32 : a.dtype();
  Tensor out = empty(out_shape, TensorOptions(cdt));
  if (out.numel() > 0) {
    const bool use_bias = bias != nullptr && bias->defined() && beta.to_double() != 0.0;
    if (use_bias) out.copy_(*bias);
    switch (cdt) {
      case DType::kFloat32:
        if (onednn) {
          gemm_batched<float, BFloat16>(a, b, out, alpha.to<float>(),
                                        use_bias ? beta.to<float>() : 0.f);
        } else {
          gemm_batched<float>(a, b, out, alpha.to<float>(), use_bias ? beta.to<float>() : 0.f);
        }
        break;
      case DType::kFloat64:
        gemm_batched<double>(a, b, out, alpha.to<double>(), use_bias ? beta.to<double>() : 0.0);
        break;
      case DType::kInt32:
        gemm_batched<int32_t>(a, b, out, alpha.to<int32_t>(), use_bias ? beta.to<int32_t>() : 0);
        break;
      case DType::kInt64:
        gemm_batched<int64_t>(a, b, out, alpha.to<int64_t>(), use_bias ? beta.to<int64_t>() : 0);
        break;
      default:
        DT_FAIL("[matmul] unsupported dtype %s", dtype_name(cdt));
    }
  }
  return cdt == dtype ? out : out.to(dtype);
}

bool gemm_operand_is_direct(const Tensor& x) {
  DT_CHECK(x.defined() && x.dim() >= 2, "[matmul] expected an operand with at least 2 dims");
  return matrix_layout(x).ok;
}
}  // namespace detail

namespace detail {

void baddbmm_into(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& beta,
                  const Scalar& alpha) {
  check_batched_matmul_operands(a, b, "baddbmm_into");
  const int64_t out_shape[] = {a.size(0), a.size(1), b.size(2)};
  DT_CHECK(out.defined() && out.dtype() == a.dtype() && out.device() == a.device() &&
               out.sizes() == IntSpan(out_shape),
           "[baddbmm_into] out must be %s with the operands' dtype and device, got %s",
           shape_str(out_shape), out.defined() ? shape_str(out.sizes()) : "undefined");
  const DType dt = out.dtype();
  Tensor c = out;  // a handle to write through
  if (!out.device().is_cpu() || !out.is_contiguous() || (dt != kFloat32 && dt != kFloat64) ||
      memory_overlaps(out, a) || memory_overlaps(out, b)) {
    c.copy_(baddbmm(out, a, b, beta, alpha));  // beta 0: baddbmm does not read self
    return;
  }
  if (out.numel() == 0) return;
  if (dt == kFloat32) {
    gemm_batched<float>(prepare_gemm_operand(a), prepare_gemm_operand(b), c, alpha.to<float>(),
                        beta.to<float>());
  } else {
    gemm_batched<double>(prepare_gemm_operand(a), prepare_gemm_operand(b), c, alpha.to<double>(),
                         beta.to<double>());
  }
}

}  // namespace detail

}  // namespace dtensor
