// The pool family's CUDA kernels when dtensor is built without CUDA (unreachable: no CUDA tensor
// can exist).
#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

void window_sum_planes_cuda(const Tensor&, const TapTensors&, const Tensor&) {
  DT_FAIL("[window] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void window_max_planes_cuda(const Tensor&, const TapTensors&, const Tensor&, const Tensor&) {
  DT_FAIL("[max_pool] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void index_add_planes_cuda(const Tensor&, const Tensor&, const Tensor&) {
  DT_FAIL("[max_pool_backward] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::detail
