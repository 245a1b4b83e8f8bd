// Shape ops that write a new tensor (PyTorch semantics): clone, contiguous, flip, roll, repeat,
// tile, tril, triu; and the view composites movedim, unflatten, unbind. Data movement only, so
// every dtype works, on either device (they are built from gather, cat, expand + reshape and
// where, whose kernels exist on both).
#pragma once

#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// A new contiguous tensor with x's values / x itself when already contiguous.
Tensor clone(const Tensor& x);
Tensor contiguous(const Tensor& x);
// The elements in reverse order along each of `dims` (distinct dims, negative counting from
// the end).
Tensor flip(const Tensor& x, IntSpan dims);
// Rotates the elements along dims[i] by shifts[i] (element j moves to j + shift, wrapping);
// without dims, along the flattened tensor (shifts must then hold one value).
Tensor roll(const Tensor& x, IntSpan shifts, IntSpan dims = {});
// Tiles x repeats[i] times along dim i; repeats may have more entries than x has dims (leading
// new dims), not fewer; entries >= 0.
Tensor repeat(const Tensor& x, IntSpan repeats);
// repeat with reps padded with leading 1s to x's rank (torch.tile).
Tensor tile(const Tensor& x, IntSpan reps);
// Each element repeated `repeats` times along dim (torch.repeat_interleave with an int):
// [a, b] -> [a, a, b, b] for repeats 2. repeats >= 0.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim);
// torch.diagonal as a copy: the (dim1, dim2) plane's diagonal `offset` (> 0 above the main
// one) becomes the last dim, the other dims keep their order. And its gradient: `grad` written
// on that diagonal of zeros of `input_shape`.
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor diagonal_backward(const Tensor& grad, IntSpan input_shape, int64_t offset, int64_t dim1,
                         int64_t dim2);
// The lower / upper triangle of the last two dims: element (i, j) is kept when
// j - i <= diagonal (tril) / j - i >= diagonal (triu), zero elsewhere. x needs >= 2 dims.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// Views: source dims moved to destination positions (the others keep their order); one dim
// split into `sizes` (one may be -1); the slices along dim, each without it.
Tensor movedim(const Tensor& x, IntSpan source, IntSpan destination);
Tensor unflatten(const Tensor& x, int64_t dim, IntSpan sizes);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);

// ---- DTensor forms ---------------------------------------------------------------------------
// The same on DTensors (copy_ops_strategy.cc). Dims the op leaves in place keep their shards;
// flipped, rolled and repeated dims are replicated first. tril / triu keep every dim sharded
// (each shard applies the diagonal shifted by its global row and column offsets). All pass
// Partial inputs through. movedim, unflatten and unbind are composites of permute, reshape
// and select.
DTensor clone(const DTensor& x);
DTensor contiguous(const DTensor& x);
DTensor flip(const DTensor& x, IntSpan dims);
DTensor roll(const DTensor& x, IntSpan shifts, IntSpan dims = {});
DTensor repeat(const DTensor& x, IntSpan repeats);
DTensor tile(const DTensor& x, IntSpan reps);
DTensor tril(const DTensor& x, int64_t diagonal = 0);
DTensor triu(const DTensor& x, int64_t diagonal = 0);
// repeat_interleave keeps every other dim's shards, and the repeated dim's when every rank's
// output block is the repeats of its own input block (even shards; grouped-query attention's
// k/v heads), otherwise that dim is replicated first; diagonal keeps the shards of the dims outside
// the plane (the plane's dims replicated first). Both pass Partial inputs through and are
// differentiable.
DTensor repeat_interleave(const DTensor& x, int64_t repeats, int64_t dim);
DTensor diagonal(const DTensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
DTensor movedim(const DTensor& x, IntSpan source, IntSpan destination);
DTensor unflatten(const DTensor& x, int64_t dim, IntSpan sizes);
std::vector<DTensor> unbind(const DTensor& x, int64_t dim = 0);

}  // namespace dtensor
