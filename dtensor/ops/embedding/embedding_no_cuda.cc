// embedding_cuda when dtensor is built without CUDA (unreachable: no CUDA tensor can exist).
#include "dtensor/ops/embedding/detail/embedding_cuda.h"

namespace dtensor::detail {

Tensor embedding_cuda(const Tensor&, const Tensor&, int64_t, bool, const char* op) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}

}  // namespace dtensor::detail
