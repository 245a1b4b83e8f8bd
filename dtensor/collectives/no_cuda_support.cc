#include "dtensor/collectives/cuda_support.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

Tensor pinned_empty_like(const Tensor& t) {
  DT_FAIL(
      "[mpi] cannot stage a tensor on %s: CUDA support is not compiled in (rebuild with "
      "-DDTENSOR_CUDA=ON)",
      t.device().str());
}

void select_cuda_device(int) {}

}  // namespace dtensor::detail
