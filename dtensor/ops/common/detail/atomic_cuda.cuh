// Device helpers shared by the CUDA kernels that move elements by index (gather / scatter /
// index / index_put / embedding): a dispatch on the element's size for kernels that move raw
// bits, atomic addition for the accumulating ones, and the dispatch over the dtypes those take.
// Include only from .cu files.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

// Calls launch(U{}) with the unsigned type of the element's size: kernels that only move
// elements need one instantiation per size, not per dtype.
template <typename Launch>
void dispatch_bits(size_t itemsize, Launch&& launch) {
  switch (itemsize) {
    case 1:
      launch(uint8_t{});
      break;
    case 2:
      launch(uint16_t{});
      break;
    case 4:
      launch(uint32_t{});
      break;
    default:
      launch(uint64_t{});
      break;
  }
}

__device__ inline void atomic_add(float* p, float v) {
  atomicAdd(p, v);
}
__device__ inline void atomic_add(double* p, double v) {
  atomicAdd(p, v);
}
__device__ inline void atomic_add(int32_t* p, int32_t v) {
  atomicAdd(p, v);
}
// Two's complement: the unsigned sum wraps exactly as the CPU kernels' integer sums do.
__device__ inline void atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
// Bool "sums" are ORs: every writer stores the same value, so a plain store is race-free.
__device__ inline void atomic_add(bool* p, bool v) {
  if (v) *p = true;
}

// Calls launch(T{}) for the 32/64-bit types the atomic kernels take (16-bit types reach them
// accumulated in float32); raises "[op] CUDA <what> supports float32, float64, int32 and int64,
// got <dtype>" for any other dtype.
template <typename Launch>
void dispatch_atomic_dtype(DType dtype, const char* op, const char* what, Launch&& launch) {
  switch (dtype) {
    case kFloat32:
      return launch(float{});
    case kFloat64:
      return launch(double{});
    case kInt32:
      return launch(int32_t{});
    case kInt64:
      return launch(int64_t{});
    default:
      DT_FAIL("[%s] CUDA %s supports float32, float64, int32 and int64, got %s", op, what,
              dtype_name(dtype));
  }
}

}  // namespace dtensor::detail
