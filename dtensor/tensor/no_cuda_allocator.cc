// The CUDA backend when the library is built without CUDA: nothing is available and every use
// throws a clear error.
#include <cstring>

#include "dtensor/tensor/error.h"
#include "dtensor/tensor/storage.h"

namespace dtensor::detail {

namespace {
[[noreturn]] void no_cuda() {
  DT_FAIL("[Tensor] CUDA support is not compiled in (build with -DDTENSOR_CUDA=ON)");
}
}  // namespace

void* cuda_allocate(size_t, int) {
  no_cuda();
}
void cuda_free(void*, void*) {}
void cuda_memcpy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes) {
  if (!dst_dev.is_cpu() || !src_dev.is_cpu()) no_cuda();
  if (nbytes > 0) std::memcpy(dst, src, nbytes);
}

}  // namespace dtensor::detail

namespace dtensor {

bool cuda_available() {
  return false;
}

int cuda_device_count() {
  return 0;
}

}  // namespace dtensor
