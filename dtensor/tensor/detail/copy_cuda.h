// The CUDA strided copy kernel behind copy_, contiguous, clone, to(dtype), cat and pad for
// tensors on a CUDA device. Internal to the tensor layer, usable by the ops layer.
#pragma once

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// Copies src into dst elementwise on their (common) CUDA device, converting dtype like
// copy_cpu (dtensor/tensor/convert.h). Same shape (expand src first), arbitrary strides (stride 0
// included); dst must not overlap src. Launches on cuda::current_stream() without
// synchronizing. The no-CUDA build throws.
void copy_cuda(const Tensor& dst, const Tensor& src);

// Sets every element of dst (a CUDA tensor, any strides) to the value whose bytes are the low
// dst.itemsize() (<= 8) bytes of `bits`: fill_ on a CUDA tensor, the value a kernel argument (no
// host-to-device copy, so that a CUDA-graph capture records it). The no-CUDA build throws.
void fill_cuda(const Tensor& dst, uint64_t bits);

// True when copy_cuda is compiled in.
bool copy_cuda_compiled();

}  // namespace dtensor::detail
