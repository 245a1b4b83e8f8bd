// copy_cuda when the library is built without CUDA: no CUDA tensor can exist, so reaching it
// is an internal error.
#include "dtensor/tensor/detail/copy_cuda.h"

namespace dtensor::detail {

void copy_cuda(const Tensor& dst, const Tensor& src) {
  DT_FAIL("[copy_] dtensor was built without CUDA (copy from %s to %s)", src.device().str(),
          dst.device().str());
}

void fill_cuda(const Tensor& dst, uint64_t) {
  DT_FAIL("[fill_] dtensor was built without CUDA (a tensor on %s)", dst.device().str());
}

bool copy_cuda_compiled() {
  return false;
}

}  // namespace dtensor::detail
