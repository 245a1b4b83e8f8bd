// The reduction CUDA entry points when dtensor is built without CUDA (unreachable: no CUDA
// tensor can exist then).
#include "dtensor/ops/reduction/detail/reduction_cuda.h"

namespace dtensor::detail {

void reduce_cuda(ReduceOp, const Tensor&, const Tensor&, const ReducePlan&, int64_t) {
  DT_FAIL("[reduce] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}
void arg_reduce_cuda(bool, const Tensor&, const Tensor&, const Tensor&, const ReducePlan&) {
  DT_FAIL("[arg_reduce] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::detail
