// Selection by a mask, whose result size depends on the data: torch.masked_select and
// torch.nonzero, on local tensors and DTensors. The DTensor forms are registered with
// OpInfo::data_dependent_shape (dtensor/core/propagation/op_schema.h): their outputs are Replicate
// and take their global shape from the local result on each call.
#pragma once

#include <cstdint>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// torch.masked_select: self and mask (bool) broadcast together (NumPy rules); the result is the
// 1-D tensor of self's elements (self's dtype) where the broadcast mask is true, in row-major
// order of the broadcast shape. Raises "[masked_select] argument mask has dtype int64, expected
// bool" and "[masked_select] cannot broadcast shapes ...". CPU and CUDA (a count pass, an
// exclusive scan of the block counts and a compaction; the count is read back to the host).
Tensor masked_select(const Tensor& self, const Tensor& mask);
// torch.nonzero: int64 [n, self.dim()], the coordinates of the n nonzero elements (NaN counts
// as nonzero, -0.0 as zero) in row-major order. A 0-d self gives [1, 0] or [0, 0].
Tensor nonzero(const Tensor& self);

// ---- DTensor forms (masked_select_strategy.cc) ---------------------------------------------
// Registered with a data-dependent output shape: the only row is all-Replicate, so sharded or
// Partial inputs are first redistributed to Replicate (all-gather / all-reduce), then every rank
// selects the same elements (no size exchange) and the output is Replicate with the selected
// count as its global shape. PyTorch DTensor registers no sharding for these ops (it falls back
// to replicating too); sharding the output would need the per-rank counts exchanged and an
// uneven layout torch.chunk cannot describe. masked_select is differentiable in self: the
// gradient is scattered into zeros of the broadcast shape at the mask's true positions
// (masked_select_backward, sharded on any dim from a replicated gradient and mask, no
// communication) and summed over the dims self was broadcast along. nonzero is not
// differentiable.
DTensor masked_select(const DTensor& self, const DTensor& mask);
DTensor nonzero(const DTensor& self);

}  // namespace dtensor
