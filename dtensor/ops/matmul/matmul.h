// Matrix products on local tensors: mm, bmm, matmul (PyTorch broadcasting rules), addmm, linear.
//
// Operands share one dtype and device. float32/float64 run through OpenBLAS (s/dgemm); an
// operand whose last two dims are row-major or a transposed view of row-major is passed to BLAS
// as is (no copy), anything else is copied contiguous first. float16/bfloat16 are converted to
// float, multiplied with sgemm and rounded back once. int32/int64 use a plain loop (wrapping
// like PyTorch). A zero-length contraction (k = 0) gives zeros; n = 0 or m = 0 gives an empty
// result. Results are fresh contiguous tensors.
#pragma once

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/scalar.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// a[n, k] @ b[k, m] -> [n, m]. Throws "[mm] shapes [2, 3] and [4, 5] cannot be multiplied
// (3 != 4)" on a size mismatch, and when either operand is not 2-d.
Tensor mm(const Tensor& a, const Tensor& b);

// Batched product a[B, n, k] @ b[B, k, m] -> [B, n, m]; batch sizes must be equal (no
// broadcasting, as torch.bmm).
Tensor bmm(const Tensor& a, const Tensor& b);

// torch.matmul: 1-d @ 1-d is a dot product (0-d result); 2-d @ 2-d is mm; a 1-d first operand is
// treated as [1, k] and a 1-d second operand as [k, 1], the added dim removed from the result;
// N-d operands multiply their last two dims and broadcast the leading (batch) dims. A batched
// first operand times a 2-d second operand is folded into one GEMM ([..., n, k] -> [-1, k]).
Tensor matmul(const Tensor& a, const Tensor& b);
// torch.dot: the 0-d sum of a[i] * b[i] of two 1-d tensors of one size and dtype (a GEMM, as
// matmul of 1-d operands). torch.outer: [n, m] with out[i][j] = a[i] * b[j] (exact products).
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);

// beta * bias + alpha * (a @ b) with a[n, k], b[k, m] and bias broadcastable to [n, m]. As in
// PyTorch, beta = 0 ignores the values of bias (NaN/inf in bias do not propagate).
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
             const Scalar& alpha = 1);
// torch.baddbmm: beta * self + alpha * bmm(a, b), self broadcast to [B, n, m]; beta == 0
// ignores self's values (NaN included), as PyTorch.
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
               const Scalar& alpha = 1);

// torch.nn.functional.linear: x[..., in] @ weight[out, in]^T (+ bias[out]) -> [..., out].
// The transposed weight is a view passed to BLAS without copying; bias is optional (pass an
// undefined Tensor()).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- DTensor forms ---------------------------------------------------------------------------
// The same products on DTensors (matmul_strategy.cc); the result equals the product of the full
// tensors. The cheapest of the Megatron strategies is chosen under the cost model, e.g. for
// mm: a S(0) and b R give S(0); a R and b S(1) give S(1); a S(1) and b S(0) give Partial(sum)
// (no communication; reduce later); batch dims shard like pointwise dims. Inputs that match
// no strategy are redistributed (the cheapest move).
DTensor mm(const DTensor& a, const DTensor& b);
DTensor bmm(const DTensor& a, const DTensor& b);
DTensor matmul(const DTensor& a, const DTensor& b);
// dot: both operands sharded alike give Partial(sum), no communication. outer: a sharded gives
// rows sharded (S(0)), b sharded columns (S(1)), no communication; Partial operands pass through
// (multilinear). Both differentiable.
DTensor dot(const DTensor& a, const DTensor& b);
DTensor outer(const DTensor& a, const DTensor& b);
// beta and alpha are runtime values (not in the propagation cache key).
DTensor addmm(const DTensor& bias, const DTensor& a, const DTensor& b, const Scalar& beta = 1,
              const Scalar& alpha = 1);
// bmm's rows with self laid out like the output (broadcast dims replicated); beta and alpha
// runtime values.
DTensor baddbmm(const DTensor& self, const DTensor& a, const DTensor& b, const Scalar& beta = 1,
                const Scalar& alpha = 1);
// ColwiseParallel: weight S(0) (and bias S(0)) gives an output sharded on the last dim;
// RowwiseParallel: input S(-1) and weight S(1) give Partial(sum); a replicated bias is then
// added on coordinate 0 of the Partial mesh dims only (no communication, no move). bias may be
// undefined.
DTensor linear(const DTensor& x, const DTensor& weight, const DTensor& bias = DTensor());

// PyTorch's torch.backends.cuda.matmul.allow_tf32: when true, float32 CUDA GEMMs may use
// TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32; 10-bit mantissa inputs). Off by default, so
// float32 results keep full float32 precision. Process-wide; has no effect on the CPU.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace dtensor
