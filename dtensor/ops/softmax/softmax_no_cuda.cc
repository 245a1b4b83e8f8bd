// softmax_cuda when dtensor is built without CUDA (unreachable: no CUDA tensor can exist).
#include "dtensor/ops/softmax/detail/softmax_cuda.h"

namespace dtensor::detail {

Tensor softmax_cuda(const Tensor&, int64_t, bool, const char* op) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}

Tensor softmax_backward_cuda(const Tensor&, const Tensor&, int64_t, bool, const char* op) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}

}  // namespace dtensor::detail
