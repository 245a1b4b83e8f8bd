// The CUDA GEMM entry point when dtensor is built without CUDA: unreachable, it throws.
#include "dtensor/ops/matmul/detail/matmul_cuda.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

Tensor gemm_cuda(const Tensor&, const Tensor&, DType, IntSpan, const Tensor*, const Scalar&,
                 const Scalar&) {
  DT_FAIL("[matmul] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::detail
