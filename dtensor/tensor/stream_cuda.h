// CUDA launch context shared by every layer's kernels (tensor, collectives, ops, optim): the
// stream kernels run on, a scoped device switch and the grid of a grid-stride loop. Public
// (dtensor::cuda) because each layer launches its own kernels. Include only from files built
// with CUDA.
#pragma once

#include <cuda_runtime.h>

#include "dtensor/tensor/cuda_check.h"

namespace dtensor::cuda {

// The stream every library kernel launches on. The default (legacy) stream for now, the
// stream Storage allocates on; the one place to change when streams are added.
inline cudaStream_t current_stream() {
  return cudaStream_t{};
}

// Makes `device` current for the scope and restores the previous device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    DT_CHECK_CUDA(cudaGetDevice(&prev_));
    if (prev_ != device) DT_CHECK_CUDA(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int cur = prev_;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != prev_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

// Grid size for a grid-stride loop over n elements with `block` threads per block.
inline unsigned int grid_for(int64_t n, int block) {
  int64_t g = (n + block - 1) / block;
  const int64_t cap = int64_t{1} << 20;
  if (g > cap) g = cap;
  if (g < 1) g = 1;
  return static_cast<unsigned int>(g);
}

}  // namespace dtensor::cuda
