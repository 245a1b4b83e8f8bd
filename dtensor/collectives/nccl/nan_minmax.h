// The NCCL backend's NaN-propagating floating max / min (detail/minmax_keys.h says why): the
// float values are turned into integer keys, reduced by NCCL's integer max / min, and turned
// back, all on the backend's stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dtensor/tensor/dtype.h"

namespace dtensor::detail {

// Whether an op on this dtype takes the key path: max / min of a floating type.
bool minmax_needs_keys(DType dtype, bool is_min_or_max);

// The key dtype for a floating dtype: int64 for float64, else int32.
DType minmax_key_dtype(DType dtype);

// keys[i] = minmax_key(x[i]) for n elements of dtype, on stream.
void minmax_to_keys(const void* x, void* keys, int64_t n, DType dtype, bool is_max,
                    cudaStream_t stream);

// out[i] = the value of keys[i], on stream.
void minmax_from_keys(const void* keys, void* out, int64_t n, DType dtype, cudaStream_t stream);

}  // namespace dtensor::detail
