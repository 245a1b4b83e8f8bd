// CUDA embedding: one thread per output element; rows are moved as raw elements of the
// weight's size (no conversion).
#include <cstdint>

#include "dtensor/ops/common/detail/atomic_cuda.cuh"
#include "dtensor/ops/embedding/detail/embedding_cuda.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {

namespace {

constexpr int kBlock = 256;

// Stops the kernel when an index was flagged out of range (the capture case of the lookup).
__global__ void trap_if_flagged(const unsigned long long* flag) {
  if (flag[0] != 0) __trap();
}

// bad[0]: 1 when some unmasked index was out of range, bad[1]: one such index (bad is null
// when masked).
template <typename U>
__global__ void embedding_kernel(const int64_t* idx, const U* w, U* out, int64_t n, int64_t dim,
                                 int64_t rows, int64_t row_offset, bool masked,
                                 unsigned long long* bad) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n * dim;
       e += step) {
    const int64_t i = e / dim, c = e - i * dim;
    const int64_t r = idx[i] - row_offset;
    const bool inside = r >= 0 && r < rows;
    if (!inside && !masked && c == 0) {
      if (atomicCAS(&bad[0], 0ull, 1ull) == 0ull) {
        bad[1] = static_cast<unsigned long long>(idx[i]);
      }
    }
    out[e] = inside ? w[r * dim + c] : U(0);
  }
}

template <typename U>
void launch(const Tensor& idx, const Tensor& w, const Tensor& out, int64_t row_offset, bool masked,
            unsigned long long* bad) {
  const int64_t n = idx.numel(), dim = w.size(1);
  embedding_kernel<U><<<cuda::grid_for(n * dim, kBlock), kBlock, 0, cuda::current_stream()>>>(
      static_cast<const int64_t*>(idx.data_ptr()), static_cast<const U*>(w.data_ptr()),
      static_cast<U*>(out.data_ptr()), n, dim, w.size(0), row_offset, masked, bad);
}

}  // namespace

Tensor embedding_cuda(const Tensor& indices, const Tensor& weight, int64_t row_offset, bool masked,
                      const char* op) {
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  Tensor out = empty(out_shape, TensorOptions(weight.dtype(), weight.device()));
  if (out.numel() == 0) {
    if (masked || indices.numel() == 0) return out;
  }
  const Tensor idx = indices.to(kInt64).contiguous();
  const Tensor w = weight.contiguous();
  cuda::DeviceGuard guard(weight.device().index);
  // Masked lookups never flag an index, so only unmasked ones pay for the flag.
  Tensor flag = masked ? Tensor() : zeros({2}, TensorOptions(kInt64, weight.device()));
  auto* bad = masked ? nullptr : static_cast<unsigned long long*>(flag.data_ptr());
  if (out.numel() > 0) {
    dispatch_bits(weight.itemsize(), [&](auto tag) {  // rows move as raw bits
      launch<decltype(tag)>(idx, w, out, row_offset, masked, bad);
    });
  } else {
    // A zero-width table still checks its indices: run one "column" into a scratch element.
    const Tensor scratch_w = zeros({weight.size(0), 1}, TensorOptions(kInt64, weight.device()));
    Tensor scratch_out = empty({idx.numel(), 1}, TensorOptions(kInt64, weight.device()));
    launch<uint64_t>(idx, scratch_w, scratch_out, row_offset, masked, bad);
  }
  DT_CHECK_CUDA(cudaGetLastError());
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DT_CHECK_CUDA(cudaStreamIsCapturing(cuda::current_stream(), &capture));
  if (!masked && capture != cudaStreamCaptureStatusNone) {
    // Captured into a CUDA graph (a compiled step's CompileOptions::cuda_graph), where nothing
    // may read the host: an out-of-range index stops the graph's launch instead (a device-side
    // trap, as PyTorch's device-side assert).
    trap_if_flagged<<<1, 1, 0, cuda::current_stream()>>>(bad);
    DT_CHECK_CUDA(cudaGetLastError());
  } else if (!masked) {
    int64_t h[2] = {0, 0};
    DT_CHECK_CUDA(
        cudaMemcpyAsync(h, bad, sizeof(h), cudaMemcpyDeviceToHost, cuda::current_stream()));
    DT_CHECK_CUDA(cudaStreamSynchronize(cuda::current_stream()));
    DT_CHECK(h[0] == 0, "[%s] index %d out of range for a table of %d rows", op, h[1],
             weight.size(0));
  }
  return out;
}

}  // namespace dtensor::detail
