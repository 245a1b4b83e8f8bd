// Indexing along one dim on local tensors (PyTorch's gather / scatter_add), and the masked
// scatter the sharded backward formulas use (embedding, the cross-entropy target pick, max with
// indices).
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace dtensor {

// torch.gather: out[i][j][k] = self[i][index[i][j][k]][k] for dim = 1 (likewise for any dim).
// index is int64 (int32 accepted) with self's rank and index.size(d) <= self.size(d) for
// d != dim; out has index's shape and self's dtype. Raises "[gather] index 7 out of range for
// dim 1 of size 5".
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);

// torch.scatter_add, out of place: a copy of self with out[i][index[i][j][k]][k] +=
// src[i][j][k] (dim = 1). index and src have one shape, with index.size(d) <= self.size(d)
// for d != dim. Raises "[scatter_add] index 7 out of range for dim 1 of size 5".
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// The shard of scatter_add(zeros(full), dim, index, src) that holds positions
// [index_offset, index_offset + shape[dim]) of `dim`: a zero tensor of `shape` (src's dtype)
// into which src is added at index - index_offset, entries whose index falls outside the
// shard skipped. A rank holding one block of a sharded dim computes its block alone; summed
// over the blocks it is the whole scatter. Accumulates in float for 16-bit types.
Tensor scatter_add_shard(IntSpan shape, int64_t dim, const Tensor& index, const Tensor& src,
                         int64_t index_offset);

}  // namespace dtensor
