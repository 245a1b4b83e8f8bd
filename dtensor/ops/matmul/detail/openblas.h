// The loaded OpenBLAS's entry points (blas_info.h says how and why dtensor loads it itself).
// Internal to the ops library: it includes <cblas.h>, whose folder only the ops target sees.
#pragma once

#include <cblas.h>

#include <string>

#include "dtensor/ops/matmul/blas_info.h"

namespace dtensor::detail {

struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  decltype(&cblas_sgemv) sgemv = nullptr;  // one-row products (matmul_cpu.cc's blas_gemm)
  decltype(&cblas_dgemv) dgemv = nullptr;
  void (*set_num_threads)(int) = nullptr;
  int (*get_num_threads)() = nullptr;
  char* (*get_corename)() = nullptr;
  char* (*get_config)() = nullptr;
  std::string chosen_by;  // as BlasInfo::chosen_by
};

// Loads OpenBLAS on the first call (thread-safe); raises "[blas] cannot load ..." when the
// library or one of its entry points is missing (again on every call).
const OpenBlas& openblas();

}  // namespace dtensor::detail
