// Free-function forms of the view and shape ops, so that Tensor and DTensor code reads
// the same: transpose(x, 0, 1) instead of x.transpose(0, 1). They are thin wrappers over the
// Tensor methods (views that share storage, except where noted); cat, stack, split and chunk
// are the free functions of dtensor/tensor/shape_ops.h, re-exported by this header.
#pragma once

#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/shape_ops.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Same elements with a new shape (one size may be -1); throws when the strides do not allow a
// view.
Tensor view(const Tensor& x, IntSpan shape);
// Like view, but copies when a view is impossible.
Tensor reshape(const Tensor& x, IntSpan shape);
// Swaps two dims.
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// torch.t: transposes a 2-d tensor; 0-d and 1-d tensors are returned as they are; more dims
// raise "[t] expected a tensor with at most 2 dims ...".
Tensor t(const Tensor& x);
// Reorders the dims: result dim i is x's dim dims[i].
Tensor permute(const Tensor& x, IntSpan dims);
// Inserts a size-1 dim at `dim` (in [-(d+1), d]).
Tensor unsqueeze(const Tensor& x, int64_t dim);
// Drops every size-1 dim.
Tensor squeeze(const Tensor& x);
// Drops `dim` if it has size 1 (no-op otherwise).
Tensor squeeze(const Tensor& x, int64_t dim);
// Merges dims start_dim..end_dim into one (a view when possible, else a copy).
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
// Broadcasts size-1 dims (stride 0) and prepends new dims; -1 keeps a size.
Tensor expand(const Tensor& x, IntSpan shape);
// Elements [start, start + length) along dim.
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// Python slice x[start:end:step] along dim (start/end clamped, step > 0).
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
// Removes dim, taking index `index` (negative counts from the end).
Tensor select(const Tensor& x, int64_t dim, int64_t index);

// Re-exported from dtensor/tensor/shape_ops.h (declared there):
//   Tensor cat(const std::vector<Tensor>&, int64_t dim = 0);
//   Tensor stack(const std::vector<Tensor>&, int64_t dim = 0);
//   std::vector<Tensor> split(const Tensor&, int64_t split_size, int64_t dim = 0);
//   std::vector<Tensor> split(const Tensor&, IntSpan split_sizes, int64_t dim = 0);
//   std::vector<Tensor> chunk(const Tensor&, int64_t chunks, int64_t dim = 0);

// ---- DTensor forms ---------------------------------------------------------------------------
// Same semantics on the global tensor. Shardings map through the op without communication
// where they can; otherwise the input is redistributed first (the engine picks the cheapest
// plan), so the result is always the op on the full tensor. Partial inputs pass through.
//   transpose/permute/t: shard dims are permuted. unsqueeze/squeeze: shard dims shift (a
//   sharded size-1 dim that squeeze drops is replicated first).
//   view/reshape/flatten: a dim that maps through unchanged keeps its shard (uneven included);
//   in a merged or split group only the leading dim stays sharded, when the leading input and
//   output sizes are divisible by the mesh size; other sharded dims are replicated first.
//   expand: broadcast dims are replicated first; kept dims keep their shard.
//   narrow/slice/select: the dim is replicated first unless narrow/slice keep it whole.
//   cat/stack: the cat dim is replicated; other dims may be sharded alike on every input.
//   split/chunk: the split dim is replicated; every output keeps the other dims' shards.
DTensor view(const DTensor& x, IntSpan shape);
DTensor reshape(const DTensor& x, IntSpan shape);
DTensor transpose(const DTensor& x, int64_t dim0, int64_t dim1);
DTensor t(const DTensor& x);
DTensor permute(const DTensor& x, IntSpan dims);
DTensor unsqueeze(const DTensor& x, int64_t dim);
DTensor squeeze(const DTensor& x);
DTensor squeeze(const DTensor& x, int64_t dim);
DTensor flatten(const DTensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
DTensor expand(const DTensor& x, IntSpan shape);
DTensor narrow(const DTensor& x, int64_t dim, int64_t start, int64_t length);
DTensor slice(const DTensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
DTensor select(const DTensor& x, int64_t dim, int64_t index);
// All inputs on one mesh, same dtype and rank.
DTensor cat(const std::vector<DTensor>& tensors, int64_t dim = 0);
DTensor stack(const std::vector<DTensor>& tensors, int64_t dim = 0);
std::vector<DTensor> split(const DTensor& x, int64_t split_size, int64_t dim = 0);
std::vector<DTensor> split(const DTensor& x, IntSpan split_sizes, int64_t dim = 0);
std::vector<DTensor> chunk(const DTensor& x, int64_t chunks, int64_t dim = 0);

}  // namespace dtensor
