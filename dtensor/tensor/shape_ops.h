// Joining, splitting and padding local tensors, and boxes of a global tensor.
#pragma once

#include <vector>

#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Concatenates along dim; all inputs share device and every other size. Zero-size inputs are
// allowed (including 1-d empty tensors, skipped as in PyTorch). Mixed dtypes promote as
// torch.cat's (promote_types over every input: float32 + float64 -> float64, int64 + float32
// -> float32, bool + int32 -> int32).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Stacks along a new dim; all inputs have the same shape; dtypes promote as cat's.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// torch.chunk: views of ceil(n / chunks) elements along dim; trailing views may be short.
// Like PyTorch it returns fewer than `chunks` views when the last ones would be empty; use
// chunk_bounds (dtensor/tensor/shape.h) for exactly `chunks` pieces.
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);
// torch.split: views of `split_size` elements (last one may be short), or of the given sizes.
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, IntSpan split_sizes, int64_t dim = 0);
// Boxes of a global tensor (first index and extent per dim), as a shard or a checkpoint chunk
// is one. box_intersection: the overlap of two boxes in (off, shape); false (and both
// cleared) when it is empty. box_view: the view of `t`, a piece whose first element sits at
// global index `t_off`, over the box (off, shape) it contains.
bool box_intersection(IntSpan a_off, IntSpan a_shape, IntSpan b_off, IntSpan b_shape, Shape& off,
                      Shape& shape);
Tensor box_view(Tensor t, IntSpan t_off, IntSpan off, IntSpan shape);
// Constant padding, torch.nn.functional.pad order: pads = {last_lo, last_hi, prev_lo, ...}.
// Negative pads crop.
Tensor pad(const Tensor& t, IntSpan pads, const Scalar& value = Scalar(0));

}  // namespace dtensor
