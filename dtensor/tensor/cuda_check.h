// DT_CHECK_CUDA(call): runs a CUDA runtime call and throws dtensor::Error naming the call, the
// CUDA error, the file and the line when it fails. Include only from files built with CUDA.
#pragma once

#include <cuda_runtime.h>

#include "dtensor/tensor/error.h"

#define DT_CHECK_CUDA(call)                                                              \
  do {                                                                                   \
    cudaError_t dt_cuda_err_ = (call);                                                   \
    if (dt_cuda_err_ != cudaSuccess) [[unlikely]] {                                      \
      ::dtensor::detail::throw_error(::absl::StrFormat(                                  \
          "[CUDA] %s failed: %s (%s) at %s:%d", #call, cudaGetErrorString(dt_cuda_err_), \
          cudaGetErrorName(dt_cuda_err_), __FILE__, __LINE__));                          \
    }                                                                                    \
  } while (0)
