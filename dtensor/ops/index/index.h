// Indexing along one dim on local tensors (PyTorch's gather / scatter / scatter_add /
// scatter_reduce / index_select / index_add / take_along_dim / one_hot), and the masked
// scatter the sharded backward formulas use (embedding, the cross-entropy target pick, max with
// indices).
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <string_view>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

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

// torch.scatter, out of place: a copy of self with out[i][index[i][j][k]][k] = src[i][j][k]
// (dim = 1); src (index's shape) or a scalar value. A position named several times takes the
// LAST entry in the index's row-major order, on the CPU and on CUDA alike (PyTorch leaves it
// unspecified). With index_offset != kNoOffset, self is the block of a tensor sharded along dim
// that starts at index_offset: entries whose index falls outside the block are skipped (each
// rank writes its own block, no communication). Raises "[scatter] index 7 out of range for dim
// 1 of size 5" otherwise.
inline constexpr int64_t kNoOffset = INT64_MIN;
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
               int64_t index_offset = kNoOffset);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value,
               int64_t index_offset = kNoOffset);

// torch.Tensor.scatter_reduce(dim, index, src, reduce, include_self), out of place: a copy of
// self in which each position named by the index (out[i][index[i][j][k]][k] for dim = 1) holds
// the reduction of the src entries naming it, and of self's value there when include_self.
// reduce is "sum", "prod", "mean", "amax" or "amin"; positions no index names keep self's value.
// "mean" divides by the number of values reduced (self counted when include_self); on integer
// dtypes it rounds down (floor division, as PyTorch). amax / amin propagate NaN. Any dtype but
// bool; 16-bit floats are reduced in float and rounded once. The CPU reduces each position in
// the index's row-major order; on CUDA sum / mean (floats) and prod (floats) may round in another
// order, amax / amin and integer results are exact. index_offset as for scatter (a block of a
// tensor sharded along dim). src must have the index's shape (PyTorch also takes a larger src
// and reads its leading part: refused here, "argument src has shape ..., expected the index's
// shape ..."); this local form converts src to self's dtype (the DTensor form, like PyTorch,
// requires one dtype). Raises "[scatter_reduce] reduce must be one of sum, prod, mean, amax,
// amin, got 'max'" and the index errors of scatter.
Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce, bool include_self = true,
                      int64_t index_offset = kNoOffset);

// The shard of scatter_add(zeros(full), dim, index, src) that holds positions
// [index_offset, index_offset + shape[dim]) of `dim`: a zero tensor of `shape` (src's dtype)
// into which src is added at index - index_offset, entries whose index falls outside the
// shard skipped. A rank holding one block of a sharded dim computes its block alone; summed
// over the blocks it is the whole scatter. Accumulates in float for 16-bit types.
Tensor scatter_add_shard(IntSpan shape, int64_t dim, const Tensor& index, const Tensor& src,
                         int64_t index_offset);

// torch.index_select: the slices of self at the positions of a 1-D (or 0-d) int64 / int32
// index along dim (repeats allowed); out has self's shape with dim of the index's length.
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
// torch.index_add(self, dim, index, source, alpha), out of place: a copy of self with
// alpha * source's slice i added at position index[i] along dim (repeats accumulate). index is
// 0-d or 1-d (int64 or int32); source has self's shape with dim of the index's length.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1);
// torch.take_along_dim(self, indices, dim): gather after broadcasting self and indices on every
// dim but `dim` (same number of dims).
Tensor take_along_dim(const Tensor& self, const Tensor& indices, int64_t dim);
// torch.nn.functional.one_hot: int64 [..., num_classes] with a 1 at each index's class;
// num_classes -1 takes max(index) + 1. Raises "[one_hot] class 7 out of range for 5 classes".
Tensor one_hot(const Tensor& index, int64_t num_classes = -1);

// ---- DTensor forms ---------------------------------------------------------------------------
// gather (index_strategy.cc). Rows for one mesh dim: every dim but `dim` sharded alike on
// self, index and out where self and index have the same size there; index sharded on `dim`
// with self replicated; self sharded on `dim` with index replicated gives a Partial(sum)
// output (each rank picks the indices that fall in its block, zeros elsewhere: no
// communication, like the vocab-sharded embedding); Partial self passes through. An index out
// of range is raised on every rank that may hold different indices. Differentiable in self.
DTensor gather(const DTensor& self, int64_t dim, const DTensor& index);
// Composites of gather (index expanded / both operands broadcast) and, for one_hot, a
// registered op sharded along every index dim (num_classes -1: the global max + 1, one
// all-reduce).
DTensor index_select(const DTensor& self, int64_t dim, const DTensor& index);
// scatter_add, registered: every dim but `dim` sharded alike where index and self agree;
// self sharded along dim with index and src replicated (each rank adds the entries that fall
// in its block, no communication); Partial self and src with a replicated index pass through.
// An index out of range is raised on every rank that may hold different indices.
// Differentiable in self (the gradient) and src (gather of the gradient).
DTensor scatter_add(const DTensor& self, int64_t dim, const DTensor& index, const DTensor& src);
// scatter (src) and scatter.value, registered with scatter_add's rows except Partial (an
// overwrite is not linear): every dim but `dim` sharded alike where index and self agree; self
// sharded along dim with index (and src) whole, each rank writing the entries that fall in its
// block. Differentiable in self (the gradient with the written positions zeroed) and src
// (gather of the gradient, as PyTorch: with a repeated position every entry naming it gets the
// gradient, though only the last one was written).
DTensor scatter(const DTensor& self, int64_t dim, const DTensor& index, const DTensor& src);
DTensor scatter(const DTensor& self, int64_t dim, const DTensor& index, const Scalar& value);
// scatter_reduce, registered (reduce and include_self are static args). Rows: every dim but
// `dim` sharded alike where index and self agree; self sharded along dim with index and src
// whole (each rank reduces the entries that fall in its block, no communication); and, where the
// reduction commutes with the Partial reduction, [P | P, R, P]: P(sum) / P(avg) for "sum"
// (P(avg) for floating dtypes only) and "mean" (floating dtypes only), P(max) for "amax", P(min)
// for "amin"; none for "prod". An index out of range is raised on every rank that may hold
// different indices. Differentiable in self and src with PyTorch's formulas (sum: the gradient /
// its gather; mean: divided by the counts; prod: grad * result / value, a single zero handled
// exactly; amax / amin: split evenly among the reduced values equal to the result), self's
// gradient zero where include_self is false and an index names the position. Unlike PyTorch, an
// excluded self (include_self false) that equals the result does not take a share of amax /
// amin's gradient.
DTensor scatter_reduce(const DTensor& self, int64_t dim, const DTensor& index, const DTensor& src,
                       std::string_view reduce, bool include_self = true);
// index_add, registered with scatter_add's rows (a replicated index; alpha is a runtime value,
// not in the cache key). Differentiable in self (the gradient) and source (alpha times the
// index_select of the gradient).
DTensor index_add(const DTensor& self, int64_t dim, const DTensor& index, const DTensor& source,
                  const Scalar& alpha = 1);
DTensor take_along_dim(const DTensor& self, const DTensor& indices, int64_t dim);
DTensor one_hot(const DTensor& index, int64_t num_classes = -1);

}  // namespace dtensor
