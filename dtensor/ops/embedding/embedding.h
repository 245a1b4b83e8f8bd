// Embedding lookups on local tensors.
#pragma once

#include <cstdint>
#include <optional>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// torch.nn.functional.embedding: rows of weight[num, dim] picked by `indices` (int32 or int64,
// any shape, 0-d included) -> [indices.shape..., dim] in weight's dtype. An index outside
// [0, num) raises "[embedding] index 12 out of range for a table of 10 rows".
Tensor embedding(const Tensor& indices, const Tensor& weight);

// The local step of a vocabulary-sharded (row-wise) embedding: `weight_shard` holds the global
// rows [row_offset, row_offset + weight_shard.size(0)). Index i in that range gives row
// i - row_offset of the shard; any other index (another shard's row, or even an invalid one)
// gives a row of zeros and is not an error. Summing the results of all shards (all-reduce) gives
// embedding(indices, full_weight) for valid indices. Same shapes and dtypes as embedding.
Tensor embedding_masked(const Tensor& indices, const Tensor& weight_shard, int64_t row_offset);

// DTensor form, no communication for these layouts (others are redistributed first):
//   table row-sharded S(0) (vocab-parallel), indices replicated -> masked local lookup, output
//     P(sum) (redistribute to R/S to reduce it: one all-reduce/reduce-scatter)
//   table column-sharded S(1), indices replicated -> output S(-1) (the embedding dim)
//   table replicated, indices S(d) -> output S(d)
// Out-of-range indices raise "[embedding] index 12 out of range for a table of 10 rows (raised
// on rank R)" on every rank that may hold different indices (check_on_all_ranks: one small
// all-reduce per mesh dim the indices are sharded on, none when they are replicated).
// padding_idx (F.embedding's; negative counts from the end, -rows <= padding_idx < rows): the
// table's gradient at that row is always zero (the lookup itself is unchanged); on a
// vocab-sharded table the rank holding that global row zeroes it.
// max_norm (F.embedding's): before the lookup, embedding_renorm_(weight, indices, max_norm,
// norm_type) rescales in place the looked-up rows whose norm_type-norm exceeds max_norm.
// scale_grad_by_freq: the table's gradient row r is divided by the number of times r occurs in
// the whole (global) batch of indices, also when the indices are sharded (PyTorch's DTensor
// counts each shard's indices alone there; with replicated indices, as in its vocab- or
// column-parallel TP, the counts agree).
DTensor embedding(const DTensor& indices, const DTensor& weight,
                  std::optional<int64_t> padding_idx = std::nullopt,
                  std::optional<double> max_norm = std::nullopt, double norm_type = 2.0,
                  bool scale_grad_by_freq = false);

// torch.embedding_renorm_: every row r of `weight` that `indices` looks up and whose
// norm_type-norm n exceeds max_norm is multiplied by max_norm / (n + 1e-7), in place and
// unrecorded (no_grad); returns weight. On any placements: the norms are of whole rows (a
// column-sharded table reduces them over its mesh dim) and the rows looked up are those of the
// global batch (sharded indices are gathered on every rank), so replicas stay equal. On a table
// whose rows are whole on every rank (replicated or row-sharded on each mesh dim) it reads and
// writes only the looked-up rows the rank holds (PyTorch's embedding_renorm_ likewise takes the
// unique indices), bringing the indices to the host once; a column-sharded or Partial table
// costs a norm over every row. Indices out of range are skipped here (embedding raises them).
const DTensor& embedding_renorm_(const DTensor& weight, const DTensor& indices, double max_norm,
                                 double norm_type = 2.0);

}  // namespace dtensor
