// The CPU GEMM library: OpenBLAS, loaded by dtensor itself (dlopen) with its kernel chosen from
// the CPU's features.
//
// Why load it ourselves: a DYNAMIC_ARCH OpenBLAS (Debian's, and most distributions') picks its
// kernels once, when it loads, from the CPU's model number, and falls back to old generic
// kernels on models it does not know: Debian 12's 0.3.21 runs its SSE3 "Prescott" kernels on
// current Intel Xeons with AVX-512 and its AVX2 "Haswell" kernels on AMD Zen 5 (AVX-512), 2-4x
// slower than the CPU allows. Its only switch is the environment variable OPENBLAS_CORETYPE,
// read at load time. So dtensor does not link OpenBLAS: the first GEMM, thread setting or
// blas_info() call (in practice the library's static initialisation, before main) loads
// libopenblas.so.0 with OPENBLAS_CORETYPE set for that moment from the features (AVX-512 F, BW,
// VL and DQ: SkylakeX, the kernels OpenBLAS itself gives Zen 4 from 0.3.22 on; AVX2 with FMA:
// Haswell, or Zen on AMD; anything older or another architecture: OpenBLAS's own detection).
// A user's OPENBLAS_CORETYPE is respected as it is. When the program had already loaded
// OpenBLAS (linked it itself), its choice stands; so it does when dtensor is loaded into a
// process that already runs threads (a host loading it late), where changing the environment is
// unsafe. The soname is tried first, then the library configure found. In both cases a generic
// kernel on a CPU that has AVX2 or AVX-512 is reported (BlasInfo::warning, the "config" log topic).
#pragma once

#include <string>
#include <string_view>

namespace dtensor {

// What runs the CPU GEMMs (for bug reports and the examples' header line).
struct BlasInfo {
  std::string library;    // openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
  std::string core;       // the kernel set in use (openblas_get_corename), e.g. "SkylakeX"
  std::string chosen_by;  // "dtensor (AVX-512)", "OPENBLAS_CORETYPE=...", "OpenBLAS", ...
  int threads = 0;        // OpenBLAS's thread count now
  std::string warning;    // non-empty when a generic kernel runs on a CPU with AVX2 / AVX-512
  // What runs bfloat16 GEMMs: "oneDNN 2.6.3 (ISA avx512_core_bf16, chosen by dtensor)", or the
  // sgemm on widened operands and why (dtensor/ops/matmul/detail/onednn.h; DTENSOR_BF16_GEMM).
  std::string bf16_gemm;
};

// Loads OpenBLAS if needed and describes it; raises "[blas] ..." when it cannot be loaded.
BlasInfo blas_info();
// One line: "OpenBLAS 0.3.21 ..., core SkylakeX (chosen by dtensor (AVX-512)), 1 thread, bf16
// GEMM: oneDNN ...", followed by "; WARNING: ..." when there is a warning.
std::string blas_info_str();

}  // namespace dtensor
