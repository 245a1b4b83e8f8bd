#include "dtensor/collectives/nccl/nccl_backend.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

bool nccl_compiled() {
  return false;
}

CommunicatorPtr make_nccl_communicator(const CommunicatorPtr&) {
  DT_FAIL("[nccl] NCCL support is not compiled in (rebuild with -DDTENSOR_CUDA=ON)");
}

}  // namespace dtensor::detail
