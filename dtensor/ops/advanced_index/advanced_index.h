// Advanced indexing (PyTorch's aten::index.Tensor and aten::index_put / index_put_): self indexed
// by a list of optional index tensors, x[i0, :, i2] as {i0, std::nullopt, i2}.
//
// Rules (PyTorch's):
//   - indices[k] indexes dim k of self (the list may be shorter than self's rank: the dims after
//     it are whole); std::nullopt is a full slice `:`. At least one entry must be a tensor.
//   - Index tensors are int64 or int32 (bool masks are refused: their result size depends on the
//     data; "[index] argument indices[0] has dtype bool, expected int64 or int32 (boolean mask
//     indexing is not supported)"). They broadcast together (NumPy rules) to a shape B.
//   - Negative indices count from the end (-1 is the last); an index outside [-size, size)
//     raises "[index] index 7 out of range for dim 1 of size 5 (indices[1])".
//   - Result layout: when the indexed dims are adjacent, B replaces them in place
//     (x[:, i, j] of x [A, M, K, C] is [A, *B, C]); when a slice separates them, B comes first,
//     followed by the other dims in order (x[i, :, j] of x [M, A, K] is [*B, A]).
// index_put(self, indices, values, accumulate) returns a copy of self with `values` (broadcast
// to the shape index(self, indices) has; self's dtype) written at the indexed positions, or
// added there when `accumulate`. Without accumulate, a position named several times takes the
// entry LAST in the broadcast index's row-major order, on the CPU and on CUDA alike (a claim
// pass, then the writes; PyTorch leaves the winner undefined). With accumulate, repeats sum: the
// CPU adds in that order, CUDA adds atomically (float rounding order unspecified, integers
// exact, wrapping on overflow); 16-bit floats accumulate in float32 and round once (as
// scatter_add); bool ORs.
#pragma once

#include <absl/types/span.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// One entry per leading dim of self; std::nullopt is a full slice.
using TensorIndices = absl::Span<const std::optional<Tensor>>;
using DTensorIndices = absl::Span<const std::optional<DTensor>>;

// torch.Tensor.__getitem__ with tensors (aten::index.Tensor): see the rules above. Gathers
// (a copy, never a view); any dtype.
Tensor index(const Tensor& self, TensorIndices indices);
// aten::index_put, out of place. values must have self's dtype and broadcast to the indexed
// result's shape.
Tensor index_put(const Tensor& self, TensorIndices indices, const Tensor& values,
                 bool accumulate = false);
// In place: self's elements are overwritten (computed out of place, then copied in). Returns
// self.
Tensor& index_put_(Tensor& self, TensorIndices indices, const Tensor& values,
                   bool accumulate = false);

// ---- DTensor forms (advanced_index_strategy.cc) ---------------------------------------------
// index, registered as "index" with the present index tensors as inputs after self and the
// indexed dims as a static arg. Rows for one mesh dim ([out | self, indices...]): a non-indexed
// dim of self sharded, the output's corresponding dim sharded (indices whole); the index
// tensors sharded along a broadcast dim (those that have it at full size; the others whole) with
// self whole, the output sharded along that broadcast dim; self sharded along an indexed dim
// with the indices whole gives a Partial(sum) output (each rank picks the indices that fall in
// its block, zeros elsewhere; no communication; a picked -0.0 sums to +0.0 with the other ranks'
// zeros, as PyTorch's MaskPartial and the gather row); Partial self passes through. An index out of
// range is raised on every rank that may hold different indices. Differentiable in self:
// index_put(zeros, indices, grad, accumulate=true).
DTensor index(const DTensor& self, DTensorIndices indices);
// index_put, registered as "index_put" (inputs self, values, indices...; the indexed dims and
// accumulate static). Rows ([out | self, values, indices...]): a non-indexed dim sharded on self
// and out (and on values where values has that dim at full size); self sharded along an indexed
// dim with values and indices whole (each rank writes or adds the entries that fall in its
// block: exact for both modes, the same entry wins); with accumulate only, [P | P, P, R..]
// (sum; avg for floating dtypes) and, for a broadcast dim, [P(sum) | P(sum), S, S..] (each rank
// adds its part of values at its part of the indices). Differentiable: self's gradient is the
// gradient (accumulate) or the gradient with the written positions zeroed; values' gradient is
// index(grad, indices) summed to values' shape (with repeats and no accumulate every entry
// naming a position gets the gradient, though one was written, as PyTorch).
DTensor index_put(const DTensor& self, DTensorIndices indices, const DTensor& values,
                  bool accumulate = false);
// In place with self's placements kept (copy_ of the out-of-place result). Returns self.
const DTensor& index_put_(const DTensor& self, DTensorIndices indices, const DTensor& values,
                          bool accumulate = false);

}  // namespace dtensor
