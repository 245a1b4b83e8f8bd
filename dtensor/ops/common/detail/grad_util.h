// Helpers of the op families' backward formulas.
#pragma once

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::detail {

// The gradient `g` of a broadcast result brought back to an input of `spec`: summed over the
// dims the input was broadcast along (leading dims, and dims where the input has size 1), then
// cast to the input's dtype (type promotion). `g` itself when nothing changes.
DTensor reduce_to(const DTensor& g, const DTensorSpec& spec);

// `g` with size-1 dims inserted at the (sorted, normalised) reduced `dims` of an input of rank
// `ndim` (all dims when empty): the keepdim form of a reduction's gradient, ready to expand.
DTensor unsqueeze_reduced(const DTensor& g, IntSpan dims, int64_t ndim);

// x == value, broadcast, with NaN equal to NaN: the elements a reduction's gradient is shared
// among when the reduction picked `value` (max() / min() / median(): a NaN result shares it
// among the NaN elements, PyTorch's evenly_distribute_backward). Bool.
DTensor equal_or_both_nan(const DTensor& x, const DTensor& value);

}  // namespace dtensor::detail
