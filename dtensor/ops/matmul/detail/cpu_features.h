// Internal: how dtensor chooses OpenBLAS's kernel set from the CPU's features (openblas.cc; the
// choice and its warning are reported by blas_info(), dtensor/ops/matmul/blas_info.h). Declared
// here so that tests can check the choice for CPUs other than the one they run on.
#pragma once

#include <string_view>

namespace dtensor {
namespace detail {

// The x86 features the choice depends on (all false elsewhere).
struct CpuFeatures {
  bool x86 = false;
  bool amd = false;
  bool avx2_fma = false;  // AVX2 and FMA, enabled by the OS
  bool avx512 = false;    // AVX-512 F, BW, VL and DQ, enabled by the OS
};
CpuFeatures detect_cpu_features();

// The OPENBLAS_CORETYPE dtensor sets for a CPU with `f` ("" = leave OpenBLAS's detection).
std::string_view choose_openblas_core(const CpuFeatures& f);
// Whether `core` (openblas_get_corename, any case) is a generic fallback for a CPU with `f`: a
// kernel set without AVX2 on a CPU with AVX2 and FMA (Prescott, Core2, Nehalem, Sandybridge,
// ...), or without AVX-512 on a CPU with AVX-512 (Haswell, Zen, ...).
bool is_generic_core(std::string_view core, const CpuFeatures& f);

}  // namespace detail
}  // namespace dtensor
