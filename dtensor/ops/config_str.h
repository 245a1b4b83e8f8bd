// One line saying what this build runs on, for bug reports and the examples' header line
// (PyTorch's torch.__config__.show()), e.g.
//   dtensor 0.3.0, CUDA compiled in, GEMM: OpenBLAS 0.3.21 ... core SkylakeX (chosen by dtensor
//   (AVX-512)), 1 thread, intra-op threads 1
#pragma once

#include <string>

namespace dtensor {

// The version, whether CUDA is compiled in, the CPU GEMM library with its kernel, the way that
// kernel was chosen and any warning about it (dtensor/ops/matmul/blas_info.h), and the intra-op
// thread count (dtensor/ops/threads.h). Loads OpenBLAS if it is not loaded yet.
std::string config_str();

}  // namespace dtensor
