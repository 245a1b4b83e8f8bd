// The CUDA GEMM entry points when dtensor is built without CUDA: the TF32 switch is kept (it is
// public API and harmless), gemm_cuda is unreachable and throws.
#include <atomic>

#include "ops/matmul/matmul_cuda.h"

namespace dtensor {

namespace {
std::atomic<bool> g_allow_tf32{false};
}  // namespace

void set_allow_tf32(bool allow) {
  g_allow_tf32.store(allow);
}
bool allow_tf32() {
  return g_allow_tf32.load();
}

namespace detail {
Tensor gemm_cuda(const Tensor&, const Tensor&, DType, IntSpan, const Tensor*, const Scalar&,
                 const Scalar&) {
  DT_FAIL("[matmul] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}
}  // namespace detail

}  // namespace dtensor
