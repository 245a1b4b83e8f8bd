// The CUDA optimizer kernels when dtensor is built without CUDA (unreachable: no CUDA tensor can
// exist).
#include "dtensor/optim/detail/optim_kernels.h"
#include "dtensor/tensor/error.h"

namespace dtensor::optim::detail {

void sgd_update_cuda(const Tensor&, const Tensor&, const Tensor&, const SGDStep&) {
  DT_FAIL("[SGD] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void adamw_update_cuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const AdamWStep&) {
  DT_FAIL("[AdamW] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void rmsprop_update_cuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const RMSpropStep&) {
  DT_FAIL("[RMSprop] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void adagrad_update_cuda(const Tensor&, const Tensor&, const Tensor&, const AdagradStep&) {
  DT_FAIL("[Adagrad] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::optim::detail
