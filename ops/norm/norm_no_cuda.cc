// norm_cuda when dtensor is built without CUDA (unreachable: no CUDA tensor can exist).
#include "ops/norm/norm_cuda.h"

namespace dtensor::detail {

Tensor norm_cuda(const Tensor&, int64_t, const Tensor&, const Tensor&, std::optional<double>, bool,
                 const char* op) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}

}  // namespace dtensor::detail
