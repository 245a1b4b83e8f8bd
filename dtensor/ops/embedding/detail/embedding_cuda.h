// CUDA embedding lookup (embedding_cuda.cu; embedding_no_cuda.cc throws when CUDA is off).
#pragma once

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// out[..., :] = weight[indices[...] - row_offset, :] for CUDA tensors (checked by the caller:
// int32/int64 indices, 2-d weight, one device). Rows outside the table give zeros when
// `masked`, and raise "[op] index i out of range for a table of r rows" otherwise (the check
// reads one flag back from the device, so unmasked lookups synchronise the stream).
Tensor embedding_cuda(const Tensor& indices, const Tensor& weight, int64_t row_offset, bool masked,
                      const char* op);

}  // namespace dtensor::detail
