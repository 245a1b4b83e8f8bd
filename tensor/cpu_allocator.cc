#include <cstdlib>

#include "tensor/error.h"
#include "tensor/storage.h"

namespace dtensor::detail {

namespace {
constexpr size_t kCpuAlignment = 64;
}

void* cpu_allocate(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment. Zero-byte requests get
  // one line too, so that every CPU storage has a valid, non-null base pointer.
  size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  if (rounded == 0) rounded = kCpuAlignment;
  DT_CHECK(rounded >= nbytes, "[Storage::allocate] nbytes %d is too large", nbytes);
  void* p = std::aligned_alloc(kCpuAlignment, rounded);
  DT_CHECK(p != nullptr, "[Storage::allocate] out of host memory allocating %d bytes", nbytes);
  return p;
}

void cpu_free(void* p, void* /*ctx*/) {
  std::free(p);
}

}  // namespace dtensor::detail
