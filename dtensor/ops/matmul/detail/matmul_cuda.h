// CUDA matrix products through cuBLAS (cublasGemmEx / cublasGemmStridedBatchedEx), used by
// mm, bmm, matmul, addmm and linear for operands on a CUDA device. float32 and float64 compute
// in their own precision, float16 and bfloat16 with float accumulation (CUBLAS_COMPUTE_32F).
// Integer operands on CUDA raise. One cuBLAS handle per device, created on first use and
// reused, bound to cuda::current_stream() on each call.
#pragma once

#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/tensor/scalar.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

namespace detail {

// The CUDA counterpart of the CPU gemm driver: a new contiguous [out_shape] tensor of `dtype`
// holding alpha * a @ b + beta * bias over the batch dims. a[..., n, k] and b[..., k, m] have
// out's batch sizes (strides may be 0) and last two dims readable by BLAS
// (gemm_operand_is_direct); `bias` (may be null or undefined) broadcasts to out and is ignored
// when beta == 0. Throws in builds without CUDA.
Tensor gemm_cuda(const Tensor& a, const Tensor& b, DType dtype, IntSpan out_shape,
                 const Tensor* bias, const Scalar& alpha, const Scalar& beta);

}  // namespace detail
}  // namespace dtensor
