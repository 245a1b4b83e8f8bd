// CPU embedding lookup (embedding_cpu.cc).
#pragma once

#include <cstdint>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// out[..., :] = weight[indices[...] - row_offset, :] for CPU tensors (checked by the caller:
// int32/int64 indices, 2-d weight, one device). Rows outside the table give zeros when
// `masked`, and raise "[op] index i out of range for a table of r rows" otherwise.
Tensor embedding_cpu(const Tensor& indices, const Tensor& weight, int64_t row_offset, bool masked,
                     const char* op);

}  // namespace dtensor::detail
