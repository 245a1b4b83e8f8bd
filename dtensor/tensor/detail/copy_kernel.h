// The strided copy kernel behind copy_, contiguous, clone and to(). Internal to the tensor
// layer but usable by other layers' CPU code.
#pragma once

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// Copies src into dst elementwise, converting dtype. Both are CPU tensors of the same shape
// (broadcast src with expand first); strides are arbitrary (stride 0 included) but dst must
// not overlap itself or src.
void copy_cpu(const Tensor& dst, const Tensor& src);

// One tensor iteration plan: the shared shape and both tensors' strides (in elements) after
// dropping size-1 dims and merging dims that are contiguous in both. Always at least 1 dim.
struct CopyPlan {
  Shape sizes;
  Shape dst_strides;
  Shape src_strides;
};
CopyPlan make_copy_plan(IntSpan sizes, IntSpan dst_strides, IntSpan src_strides);

}  // namespace dtensor::detail
