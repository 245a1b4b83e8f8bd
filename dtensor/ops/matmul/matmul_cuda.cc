// cuBLAS GEMM driver. cuBLAS is column-major: a row-major C[n, m] is the column-major C^T, so
// C = A @ B is computed as C^T = B^T @ A^T with the operands swapped. A row-major operand with
// leading dim ld is, read column-major, its own transpose (op N); a transposed view of a
// row-major matrix is read with op T.
#include "dtensor/ops/matmul/detail/matmul_cuda.h"

#include <algorithm>
#include <array>
#include <climits>
#include <mutex>
#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/detail/blas_layout.h"
#include "dtensor/ops/matmul/detail/cublas_check_cuda.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor {

namespace {

constexpr int kMaxDevices = 64;

// cuBLAS handles no thread uses, per device: a thread's handles come back here when it ends, for
// the next thread (never destroyed: destroying handles at exit races with the driver's own
// teardown).
struct HandlePool {
  std::mutex mu;
  std::array<std::vector<cublasHandle_t>, kMaxDevices> free;
};
HandlePool& handle_pool() {
  static auto* pool = new HandlePool;  // never destroyed: threads may end after static teardown
  return *pool;
}

// This thread's handle per device. One per thread, as PyTorch keeps: a handle's stream is set
// before each GEMM (cublasSetStream), and a handle shared between threads with different current
// streams (a compiled step's CUDA-graph capture runs on its own) would let one thread's GEMM run
// on the other's stream, or be pulled into its capture.
struct ThreadHandles {
  std::array<cublasHandle_t, kMaxDevices> handles{};
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    HandlePool& pool = handle_pool();
    const std::lock_guard<std::mutex> lock(pool.mu);
    for (int d = 0; d < kMaxDevices; ++d) {
      if (handles[d] != nullptr) pool.free[d].push_back(handles[d]);
    }
  }
};

// This thread's handle of `device` (from the pool, or created on first use).
cublasHandle_t handle_for(int device) {
  DT_CHECK(device >= 0 && device < kMaxDevices, "[matmul] CUDA device %d out of range (max %d)",
           device, kMaxDevices);
  thread_local ThreadHandles mine;
  cublasHandle_t& h = mine.handles[device];
  if (h != nullptr) return h;
  {
    HandlePool& pool = handle_pool();
    const std::lock_guard<std::mutex> lock(pool.mu);
    if (!pool.free[device].empty()) {
      h = pool.free[device].back();
      pool.free[device].pop_back();
      return h;
    }
  }
  cublasHandle_t created = nullptr;
  DT_CHECK_CUBLAS(cublasCreate(&created));
  // Split-K partial sums of float16/bfloat16 GEMMs stay in the float compute type instead of
  // being rounded to the 16-bit output type between steps (cuBLAS's default allows that).
  DT_CHECK_CUBLAS(cublasSetMathMode(
      created, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                         CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  h = created;
  return h;
}

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::kFloat32:
      return CUDA_R_32F;
    case DType::kFloat64:
      return CUDA_R_64F;
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    default:
      break;
  }
  DT_FAIL("[matmul] CUDA matmul supports float32, float64, float16 and bfloat16, got %s",
          dtype_name(d));
}

int to_int(int64_t v, const char* what) {
  DT_CHECK(v <= INT_MAX, "[matmul] %s = %d exceeds the cuBLAS integer range", what, v);
  return static_cast<int>(v);
}

}  // namespace

namespace detail {

Tensor gemm_cuda(const Tensor& a, const Tensor& b, DType dtype, IntSpan out_shape,
                 const Tensor* bias, const Scalar& alpha, const Scalar& beta) {
  const DType dt = a.dtype();
  const cudaDataType_t ctype = cuda_type(dt);
  const Device dev = a.device();
  Tensor out = empty(out_shape, TensorOptions(dt, dev));
  if (out.numel() > 0) {
    const bool use_bias = bias != nullptr && bias->defined() && beta.to_double() != 0.0;
    if (use_bias) out.copy_(*bias);
    const int64_t nb = out.dim() - 2;
    const int64_t n = out.size(-2), m = out.size(-1), k = a.size(-1);
    if (k == 0) {
      // Empty contraction: a @ b is all zeros.
      if (!use_bias) {
        out.zero_();
      } else if (beta.to_double() != 1.0) {
        mul_(out, beta);
      }
    } else {
      // cuBLAS reads the operands as BLAS does (blas_layout.h): trans = false for row-major,
      // true for a transposed row-major matrix.
      const MatLayout la = matrix_layout(a), lb = matrix_layout(b);
      DT_CHECK(la.ok && lb.ok, "[matmul] internal error: operand layout not BLAS-compatible");
      cuda::DeviceGuard guard(dev.index);
      cublasHandle_t h = handle_for(dev.index);
      DT_CHECK_CUBLAS(cublasSetStream(h, cuda::current_stream()));
      const bool dbl = dt == DType::kFloat64;
      cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
      if (dbl)
        compute = CUBLAS_COMPUTE_64F;
      else if (dt == DType::kFloat32 && allow_tf32())
        compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      const float alpha_f = alpha.to<float>(), beta_f = use_bias ? beta.to<float>() : 0.f;
      const double alpha_d = alpha.to<double>(), beta_d = use_bias ? beta.to<double>() : 0.0;
      const void* pal = dbl ? static_cast<const void*>(&alpha_d) : &alpha_f;
      const void* pbe = dbl ? static_cast<const void*>(&beta_d) : &beta_f;
      const cublasOperation_t op_b = lb.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
      const cublasOperation_t op_a = la.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
      const int im = to_int(m, "m"), in = to_int(n, "n"), ik = to_int(k, "k");
      const int lda = to_int(la.ld, "lda"), ldb = to_int(lb.ld, "ldb");
      const int64_t isz = static_cast<int64_t>(a.itemsize());
      const char* pa = static_cast<const char*>(a.data_ptr());
      const char* pb = static_cast<const char*>(b.data_ptr());
      char* pc = static_cast<char*>(out.data_ptr());
      if (nb == 0) {
        DT_CHECK_CUBLAS(cublasGemmEx(h, op_b, op_a, im, in, ik, pal, pb, ctype, ldb, pa, ctype, lda,
                                     pbe, pc, ctype, im, compute, CUBLAS_GEMM_DEFAULT));
      } else {
        // The innermost batch dim is one strided-batched call; outer batch dims loop.
        const int64_t last = nb - 1;
        const int batch = to_int(out.size(last), "batch");
        const int64_t outer = out.numel() / (n * m) / out.size(last);
        BatchWalk walk(a, b, out, last);
        for (int64_t o = 0; o < outer; ++o, walk.next()) {
          const int64_t off_a = walk.a_offset(), off_b = walk.b_offset();
          DT_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
              h, op_b, op_a, im, in, ik, pal, pb + off_b * isz, ctype, ldb, b.stride(last),
              pa + off_a * isz, ctype, lda, a.stride(last), pbe, pc + o * batch * n * m * isz,
              ctype, im, n * m, batch, compute, CUBLAS_GEMM_DEFAULT));
        }
      }
    }
  }
  return dt == dtype ? out : out.to(dtype);
}

}  // namespace detail
}  // namespace dtensor
