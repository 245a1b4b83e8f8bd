// batch_norm_sums' and batch_norm_affine's CUDA kernels when dtensor is built without CUDA
// (unreachable: no CUDA tensor can exist).
#include "dtensor/ops/norm/detail/batch_norm_kernels.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

void batch_norm_sums_cuda(const Tensor&, int64_t, int64_t, int64_t, const Tensor&) {
  DT_FAIL("[batch_norm_sums] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void batch_norm_sums_backward_cuda(const Tensor&, const Tensor&, int64_t, int64_t, int64_t,
                                   const Tensor&) {
  DT_FAIL(
      "[batch_norm_sums_backward] dtensor was built without CUDA (configure with "
      "-DDTENSOR_CUDA=ON)");
}

void batch_norm_affine_cuda(const Tensor&, const Tensor&, int64_t, int64_t, int64_t,
                            const Tensor&) {
  DT_FAIL("[batch_norm_affine] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void batch_norm_affine_backward_cuda(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t,
                                     int64_t, const Tensor&, const Tensor&) {
  DT_FAIL(
      "[batch_norm_affine_backward] dtensor was built without CUDA (configure with "
      "-DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::detail
