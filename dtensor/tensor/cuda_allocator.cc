// The CUDA backend of Storage: stream-ordered allocation on the current (default) stream and
// synchronous copies between any two devices.
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "dtensor/tensor/cuda_check.h"
#include "dtensor/tensor/detail/deferred_free_cuda.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {

namespace {

// The device's default stream-ordered pool keeps freed memory instead of trimming it back to
// the driver at every synchronisation (the pool's default release threshold is 0, which makes
// an allocation after any cudaMemcpy or stream sync map fresh pages). Set once per device.
void keep_pool_memory(int device) {
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  if (device >= kMaxDevices) return;
  std::call_once(once[device], [device] {
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
      cudaGetLastError();  // pools unsupported: cudaMallocAsync reports it on first use
      return;
    }
    uint64_t threshold = UINT64_MAX;
    DT_CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  });
}

// Memory released while this thread's stream was captured (detail/deferred_free_cuda.h).
struct DeferredFree {
  void* p;
  int device;
};
thread_local std::vector<DeferredFree> t_deferred_frees;

}  // namespace

int flush_deferred_cuda_frees() {
  std::vector<DeferredFree> frees;
  frees.swap(t_deferred_frees);
  for (const DeferredFree& f : frees) {
    cuda::DeviceGuard guard(f.device);
    DT_CHECK_CUDA(cudaFreeAsync(f.p, cuda::current_stream()));
  }
  return static_cast<int>(frees.size());
}

void* cuda_allocate(size_t nbytes, int device) {
  DT_CHECK(device >= 0 && device < cuda_device_count(),
           "[Storage::allocate] CUDA device %d does not exist (%d devices visible)", device,
           cuda_device_count());
  // Zero-byte requests get one byte so that every storage has a valid base pointer.
  if (nbytes == 0) nbytes = 1;
  cuda::DeviceGuard guard(device);
  keep_pool_memory(device);
  void* p = nullptr;
  DT_CHECK_CUDA(cudaMallocAsync(&p, nbytes, cuda::current_stream()));
  return p;
}

void cuda_free(void* p, void* ctx) {
  if (p == nullptr) return;
  // Runs from a destructor: errors cannot be thrown from here, and a failing free at shutdown
  // (driver already torn down) is harmless, so they are ignored.
  int device = static_cast<int>(reinterpret_cast<intptr_t>(ctx));
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) return;
  if (prev != device) cudaSetDevice(device);
  // Stream-ordered on the stream every kernel and collective-completion wait is ordered on, so
  // the memory is reused only after the work already queued there (NCCL included) is done. A
  // stream a CUDA-graph capture set (never the default one) may be capturing: the free waits for
  // the capture's end (detail/deferred_free_cuda.h).
  const cudaStream_t stream = cuda::current_stream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (stream != nullptr && cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
      capture != cudaStreamCaptureStatusNone) {
    t_deferred_frees.push_back({p, device});
  } else {
    cudaFreeAsync(p, stream);
  }
  if (prev != device) cudaSetDevice(prev);
}

void cuda_memcpy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  if (dst_dev.is_cuda() && src_dev.is_cuda() && dst_dev.index != src_dev.index) {
    DT_CHECK_CUDA(cudaMemcpyPeer(dst, dst_dev.index, src, src_dev.index, nbytes));
    return;
  }
  if (dst_dev.is_cuda() && src_dev.is_cuda()) {
    // One device: ordered on the current stream, with no host synchronisation (what cudaMemcpy
    // does for device-to-device copies on the default stream), so that a CUDA-graph capture
    // (dtensor/compile/cuda_graph_cuda.cc), whose stream is then current, records the copy.
    cuda::DeviceGuard guard(dst_dev.index);
    DT_CHECK_CUDA(
        cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, cuda::current_stream()));
    return;
  }
  cudaMemcpyKind kind = cudaMemcpyDeviceToDevice;
  int device = dst_dev.index;
  if (dst_dev.is_cuda() && src_dev.is_cpu()) {
    kind = cudaMemcpyHostToDevice;
    device = dst_dev.index;
  } else if (dst_dev.is_cpu()) {
    kind = cudaMemcpyDeviceToHost;
    device = src_dev.index;
  }
  cuda::DeviceGuard guard(device);
  DT_CHECK_CUDA(cudaMemcpy(dst, src, nbytes, kind));
}

}  // namespace dtensor::detail

namespace dtensor {

bool cuda_available() {
  return cuda_device_count() > 0;
}

int cuda_device_count() {
  int n = 0;
  // No driver or no device is "zero devices", not an error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace dtensor
