#include "dtensor/collectives/cuda_support.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "dtensor/tensor/cuda_check.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

namespace {

// Pinned buffers are slow to allocate (cudaMallocHost maps and locks pages), so freed staging
// buffers are kept for reuse. Bounded: at most kMaxPooled buffers are cached.
constexpr size_t kMaxPooled = 16;

struct PinnedBuffer {
  void* ptr;
  size_t nbytes;
};

struct PinnedPool {
  std::mutex mu;
  std::vector<PinnedBuffer> free;
};

PinnedPool& pool() {
  static PinnedPool* p = new PinnedPool();  // never destroyed: deleters may run at exit
  return *p;
}

void release_pinned(void* ptr, void* ctx) {
  size_t nbytes = reinterpret_cast<size_t>(ctx);
  PinnedPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.free.size() < kMaxPooled) {
    p.free.push_back({ptr, nbytes});
  } else {
    cudaFreeHost(ptr);
  }
}

}  // namespace

Tensor pinned_empty_like(const Tensor& t) {
  const size_t need = std::max<size_t>(t.nbytes(), 1);
  void* ptr = nullptr;
  size_t nbytes = 0;
  {
    PinnedPool& p = pool();
    std::lock_guard<std::mutex> lock(p.mu);
    // Smallest cached buffer that fits.
    size_t best = p.free.size();
    for (size_t i = 0; i < p.free.size(); ++i) {
      const bool fits = p.free[i].nbytes >= need;
      if (fits && (best == p.free.size() || p.free[i].nbytes < p.free[best].nbytes)) best = i;
    }
    if (best != p.free.size()) {
      ptr = p.free[best].ptr;
      nbytes = p.free[best].nbytes;
      p.free.erase(p.free.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  if (ptr == nullptr) {
    DT_CHECK_CUDA(cudaMallocHost(&ptr, need));
    nbytes = need;
  }
  Storage storage = Storage::from_blob(ptr, nbytes, Device(DeviceType::kCPU), &release_pinned,
                                       reinterpret_cast<void*>(nbytes));
  return Tensor(storage, t.dtype(), t.sizes(), contiguous_strides(t.sizes()), 0);
}

void select_cuda_device(int local_rank) {
  int count = cuda_device_count();
  if (count > 0) DT_CHECK_CUDA(cudaSetDevice(local_rank % count));
}

}  // namespace dtensor::detail
