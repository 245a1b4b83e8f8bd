// CUDA indexing kernels (index_cuda.cu; index_no_cuda.cc throws when CUDA is off). Arguments
// are checked by the callers in index.cc; tensors are contiguous, index int64.
#pragma once

#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// out = gather(self, dim, index) (out preallocated with index's shape). Out-of-range indices
// raise "[gather] ..." (one flag read back from the device).
void gather_cuda(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out);
// out[... index - offset ...] += src[...] along dim, skipping indices outside [0, out.size(dim))
// when `masked` and raising "[op] ..." for them otherwise. out is contiguous, in place.
void scatter_add_cuda(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                      int64_t offset, bool masked, const char* op);

// out[... index - offset ...] = src[...] along dim (same masking and errors); a slot named
// several times takes the entry last in row-major index order (a claim pass, then the writes),
// as the CPU loop does. Any dtype (elements move as raw bits).
void scatter_cuda(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                  int64_t offset, bool masked, const char* op);

// out[... index - offset ...] reduced with src[...] along dim (same masking and errors) for
// scatter_reduce: out holds self (float32, float64, int32 or int64; 16-bit callers pass float32).
// With include_self false, the slots an index names first take the reduction's identity; "mean"
// then divides by the per-slot count (floor division for integers). sum / mean add atomically
// (float rounding order unspecified); prod, amax and amin update through compare-and-swap loops
// (amax / amin exact and NaN-propagating; integer prod exact).
void scatter_reduce_cuda(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                         int64_t offset, bool masked, ScatterReduceOp reduce, bool include_self,
                         const char* op);

}  // namespace dtensor::detail
