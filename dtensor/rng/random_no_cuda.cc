// The no-CUDA counterpart of the CUDA random kernels: every entry point raises a clear error.
#include "dtensor/rng/detail/cuda_launch.h"

namespace dtensor::detail {

bool rng_cuda_compiled() {
  return false;
}

const char* rng_cuda_launch(const RngLaunch&) {
  return "dtensor was built without CUDA (DTENSOR_CUDA=OFF): random ops on CUDA tensors are "
         "unavailable";
}

}  // namespace dtensor::detail
