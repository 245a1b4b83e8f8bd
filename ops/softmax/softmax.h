// Softmax and log-softmax along one dim of a local tensor.
//
// Numerically stable (the maximum along `dim` is subtracted before exponentiating); 16-bit
// inputs are computed in float and float32/float64 in double, then rounded once to the input
// dtype. Any dim (negative counts from the end), any strides; the result is a new contiguous
// tensor of the input's shape and dtype. A slice whose elements are all -inf gives NaN, as in
// PyTorch. Floating dtypes only.
#pragma once

#include "dtensor/distributed_tensor.h"
#include "tensor/tensor.h"

namespace dtensor {

// exp(x - max) / sum(exp(x - max)) along dim.
Tensor softmax(const Tensor& x, int64_t dim);

// (x - max) - log(sum(exp(x - max))) along dim.
Tensor log_softmax(const Tensor& x, int64_t dim);

// DTensor forms (registered in softmax_strategy.cc): the softmax dim must be whole on each
// rank, so an input sharded along it is redistributed first (the engine's cheapest plan, an
// all-gather or an all-to-all onto another dim), and a Partial input is reduced first; every
// other dim keeps its shard (uneven included), with no communication.
DTensor softmax(const DTensor& x, int64_t dim);
DTensor log_softmax(const DTensor& x, int64_t dim);

}  // namespace dtensor
