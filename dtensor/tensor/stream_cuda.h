// CUDA launch context shared by every layer's kernels (tensor, collectives, ops, optim): the
// stream kernels run on, a scoped device switch and the grid of a grid-stride loop. Public
// (dtensor::cuda) because each layer launches its own kernels. Include only from files built
// with CUDA.
#pragma once

#include <cuda_runtime.h>

#include "dtensor/tensor/cuda_check.h"

namespace dtensor::cuda {

// The stream every library kernel launches on (and Storage allocates on): the default (legacy)
// stream, unless this thread set another (set_current_stream: a compiled step's CUDA-graph
// capture and replay, dtensor/compile/cuda_graph_cuda.cc, which cannot capture the legacy
// stream); the one place to change when streams are added.
inline thread_local cudaStream_t t_current_stream = nullptr;
inline cudaStream_t current_stream() {
  return t_current_stream;
}
// Sets this thread's stream (nullptr: the default stream) and returns the one it replaces.
inline cudaStream_t set_current_stream(cudaStream_t s) {
  const cudaStream_t previous = t_current_stream;
  t_current_stream = s;
  return previous;
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
