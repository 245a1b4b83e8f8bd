// The distance family's CUDA entry points when dtensor is built without CUDA (unreachable: no
// CUDA tensor can exist then).
#include "dtensor/ops/distance/detail/distance_kernels.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

void cdist_cuda(const Tensor&, const Tensor&, const Tensor&, CdistGeom, double) {
  DT_FAIL("[cdist] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void cdist_backward_cuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         CdistGeom, double) {
  DT_FAIL("[cdist_backward] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::detail
