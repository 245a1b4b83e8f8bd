// norm_cuda when dtensor is built without CUDA (unreachable: no CUDA tensor can exist).
#include "dtensor/ops/norm/detail/norm_cuda.h"

namespace dtensor::detail {

Tensor norm_cuda(const Tensor&, int64_t, const Tensor&, const Tensor&, std::optional<double>, bool,
                 const char* op, const Tensor&, const Tensor&) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)", op);
}

void norm_backward_cuda(const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&,
                        const Tensor&, bool rms, const Tensor&, const Tensor&, const Tensor&) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)",
          rms ? "rms_norm_backward" : "layer_norm_backward");
}

}  // namespace dtensor::detail
