// The few CUDA runtime calls the collectives layer needs, behind functions so that only
// cuda_support.cc (built when CUDA is on) includes CUDA headers; no_cuda_support.cc is the
// no-CUDA counterpart built otherwise.
#pragma once

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// A contiguous CPU tensor with t's dtype and sizes in pinned (page-locked) host memory, for
// staging CUDA tensors through MPI. Buffers are pooled and reused. Contents uninitialised.
// Throws when CUDA is not compiled in.
Tensor pinned_empty_like(const Tensor& t);

// cudaSetDevice(local_rank % device count) when devices are present; otherwise does nothing.
void select_cuda_device(int local_rank);

}  // namespace dtensor::detail
