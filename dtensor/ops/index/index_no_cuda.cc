// The CUDA indexing kernels when dtensor is built without CUDA (unreachable: no CUDA tensor can
// exist).
#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/index/detail/index_cuda.h"

namespace dtensor::detail {

void gather_cuda(const Tensor&, int64_t, const Tensor&, const Tensor&) {
  DT_FAIL("[gather] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void scatter_add_cuda(const Tensor&, int64_t, const Tensor&, const Tensor&, int64_t, bool,
                      const char* op) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}

void scatter_cuda(const Tensor&, int64_t, const Tensor&, const Tensor&, int64_t, bool,
                  const char* op) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}

void scatter_reduce_cuda(const Tensor&, int64_t, const Tensor&, const Tensor&, int64_t, bool,
                         ScatterReduceOp, bool, const char* op) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}

}  // namespace dtensor::detail
