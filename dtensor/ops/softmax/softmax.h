// Softmax and log-softmax along one dim of a local tensor.
//
// Numerically stable (the maximum along `dim` is subtracted before exponentiating). float32,
// float16 and bfloat16 are computed in float, float64 in double, and rounded once to the input
// dtype; the sums of exponentials use several vector accumulators (an order other than the
// sequential one: float32 results agree with a double reference to a few ulp, 3e-6 relative
// in the tests). Any dim (negative counts from the end), any strides; the result is a new
// contiguous tensor of the input's shape and dtype. A slice holding NaN or +inf, or whose
// elements are all -inf, gives NaN, as in PyTorch. Floating dtypes only.
//
// CPU kernels: vectorised (Google Highway, runtime dispatch to AVX2 / AVX-512 / a portable
// fallback), two passes over each slice (an online max and sum of exponentials, then the write),
// one exponential per element: Highway's range reduction and polynomial (1 ulp); for float32
// the exponentials below 2^-126 of the slice's maximum are flushed to 0 (an absolute error
// under 1.2e-38 in a probability).
#pragma once

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// exp(x - max) / sum(exp(x - max)) along dim.
Tensor softmax(const Tensor& x, int64_t dim);

// (x - max) - log(sum(exp(x - max))) along dim.
Tensor log_softmax(const Tensor& x, int64_t dim);

// softmax(-x, dim), as torch.nn.functional.softmin (the negation is its own pass, as PyTorch's).
Tensor softmin(const Tensor& x, int64_t dim);

// Gradient of softmax with respect to its input, from the gradient of its output and the
// output itself (out = softmax(x, dim)): out * (grad_out - sum(grad_out * out, dim)), the sum
// kept along dim. grad_out and out must have one shape, floating dtype and device; the result
// is a new contiguous tensor of that shape and dtype, computed and accumulated as the forward.
Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim);

// Gradient of log_softmax (out = log_softmax(x, dim)): grad_out - exp(out) * sum(grad_out, dim).
// Same arguments and rules as softmax_backward.
Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim);

// DTensor forms (registered in softmax_strategy.cc): the softmax dim must be whole on each
// rank, so an input sharded along it is redistributed first (the engine's cheapest plan, an
// all-gather or an all-to-all onto another dim), and a Partial input is reduced first; every
// other dim keeps its shard (uneven included), with no communication.
DTensor softmax(const DTensor& x, int64_t dim);
DTensor log_softmax(const DTensor& x, int64_t dim);
DTensor softmin(const DTensor& x, int64_t dim);

}  // namespace dtensor
