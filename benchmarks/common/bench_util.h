// Shared by the benchmark programs: their main() (the MPI runtime around run(), a
// dtensor::Error reported on stderr as exit status 1) and the bit-for-bit result check.
#pragma once

#include <cstdio>
#include <cstring>

#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::bench {

// Same shape, dtype and bytes (any layout).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// The body of a benchmark's main(): returns run(argc, argv), or 1 after printing an Error.
inline int run_main(int argc, char** argv, int (*run)(int, char**)) {
  Runtime runtime(&argc, &argv);
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}

}  // namespace dtensor::bench
