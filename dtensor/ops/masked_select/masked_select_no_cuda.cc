// The CUDA kernels of masked_select / nonzero when dtensor is built without CUDA (unreachable:
// no CUDA tensor can exist).
#include "dtensor/ops/masked_select/detail/masked_select_cuda.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

Tensor flatnonzero_cuda(const Tensor&) {
  DT_FAIL("[masked_select] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void unravel_cuda(const Tensor&, IntSpan, const Tensor&) {
  DT_FAIL("[nonzero] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::detail
