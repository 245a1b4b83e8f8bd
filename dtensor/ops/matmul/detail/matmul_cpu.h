// CPU matrix products (matmul_cpu.cc), called by matmul.cc after its checks; the counterpart of
// matmul_cuda.h's gemm_cuda.
#pragma once

#include "dtensor/tensor/scalar.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// A GEMM operand as the backends read it: 16-bit floats become float32 (bfloat16 stays where
// oneDNN runs it), an operand whose last two dims BLAS cannot read is made contiguous (cuBLAS
// takes 16-bit operands as they are). Done before any batch expansion.
Tensor prepare_gemm_operand(const Tensor& x);
// gemm_cuda's CPU counterpart: a new [out_shape] tensor of `dtype` holding alpha * a @ b + beta
// * bias over the batch dims, from prepared operands.
Tensor gemm_cpu(const Tensor& a, const Tensor& b, DType dtype, IntSpan out_shape,
                const Tensor* bias, const Scalar& alpha, const Scalar& beta);
// bmm's operand checks (a [B, n, k], b [B, k, m]; errors name `op`), matmul.cc's.
void check_batched_matmul_operands(const Tensor& a, const Tensor& b, const char* op);

}  // namespace dtensor::detail
