// The CUDA advanced-indexing kernels when dtensor is built without CUDA (unreachable: no CUDA
// tensor can exist).
#include "dtensor/ops/advanced_index/detail/advanced_index_cuda.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

void index_gather_cuda(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t) {
  DT_FAIL("[index] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void index_put_cuda(const Tensor&, const Tensor&, const Tensor&, bool, int64_t, int64_t, int64_t) {
  DT_FAIL("[index_put] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::detail
