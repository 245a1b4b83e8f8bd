// The CUDA convolution kernels when dtensor is built without CUDA (unreachable: no CUDA tensor
// can exist).
#include "dtensor/ops/conv/detail/conv_kernels.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

void conv_forward_cuda(const ConvGeometry&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&) {
  DT_FAIL("[convolution] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void conv_data_cuda(const ConvGeometry&, const Tensor&, const Tensor&, const Tensor&,
                    const Tensor&) {
  DT_FAIL("[convolution] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void conv_weight_cuda(const ConvGeometry&, const Tensor&, const Tensor&, const Tensor&) {
  DT_FAIL("[convolution] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::detail
