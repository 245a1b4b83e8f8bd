// DT_CHECK_MPI: wraps an MPI call; a failure throws dtensor::Error with the call text, the MPI
// error string, file and line.
#pragma once

#include <mpi.h>

#include <string>

#include "dtensor/tensor/error.h"

namespace dtensor::detail {
[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);
}  // namespace dtensor::detail

#define DT_CHECK_MPI(call)                                                       \
  do {                                                                           \
    int dt_mpi_rc_ = (call);                                                     \
    if (dt_mpi_rc_ != MPI_SUCCESS) [[unlikely]] {                                \
      ::dtensor::detail::throw_mpi_error(dt_mpi_rc_, #call, __FILE__, __LINE__); \
    }                                                                            \
  } while (0)
