// The GEMM helpers of matmul (matmul_cpu.cc) that attention's kernels use: a cross-family helper,
// not installed.
#pragma once

#include "dtensor/ops/matmul/matmul.h"

namespace dtensor {

namespace detail {
// True when the last two dims of x can be handed to BLAS without a copy: row-major with a
// leading dim >= the row length, or the transpose of such a matrix (the strides of size-1 dims
// do not matter). float32/float64 operands failing this are copied contiguous first.
bool gemm_operand_is_direct(const Tensor& x);
// out = beta * out + alpha * bmm(a, b), written into out ([B, n, m], a's dtype and device). A
// contiguous float32/float64 out on the CPU that overlaps neither operand is BLAS's C itself
// (no copy in or out, so a block can accumulate products in place); any other out takes
// baddbmm's result by copy. With beta 0 out's values are ignored (it may be uninitialised).
void baddbmm_into(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& beta,
                  const Scalar& alpha);
}  // namespace detail

}  // namespace dtensor
