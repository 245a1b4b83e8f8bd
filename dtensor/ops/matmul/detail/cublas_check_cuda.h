// DT_CHECK_CUBLAS(call): runs a cuBLAS call and throws dtensor::Error naming the call, the
// status, the file and the line when it fails. Include only from files built with CUDA.
#pragma once

#include <cublas_v2.h>

#include "dtensor/tensor/error.h"

#define DT_CHECK_CUBLAS(call)                                                                      \
  do {                                                                                             \
    cublasStatus_t dt_cublas_st_ = (call);                                                         \
    if (dt_cublas_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                                     \
      ::dtensor::detail::throw_error(                                                              \
          ::absl::StrFormat("[cuBLAS] %s failed: %s (status %d) at %s:%d", #call,                  \
                            cublasGetStatusString(dt_cublas_st_), static_cast<int>(dt_cublas_st_), \
                            __FILE__, __LINE__));                                                  \
    }                                                                                              \
  } while (0)
