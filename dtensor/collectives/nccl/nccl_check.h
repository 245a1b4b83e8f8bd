// DT_CHECK_NCCL: wraps an NCCL call; a failure throws dtensor::Error with the call text, NCCL's
// error string and last-error text, file and line. ncclInProgress (nonblocking communicators)
// is not a failure: the caller polls ncclCommGetAsyncError.
#pragma once

#include <nccl.h>

#include "dtensor/tensor/error.h"

namespace dtensor::detail {
[[noreturn]] void throw_nccl_error(ncclResult_t rc, const char* call, const char* file, int line);
}  // namespace dtensor::detail

#define DT_CHECK_NCCL(call)                                                         \
  do {                                                                              \
    ncclResult_t dt_nccl_rc_ = (call);                                              \
    if (dt_nccl_rc_ != ncclSuccess && dt_nccl_rc_ != ncclInProgress) [[unlikely]] { \
      ::dtensor::detail::throw_nccl_error(dt_nccl_rc_, #call, __FILE__, __LINE__);  \
    }                                                                               \
  } while (0)
