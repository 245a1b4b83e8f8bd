// CUDA strided copy with dtype conversion: one thread per element (grid-stride), offsets from
// an OffsetCalc over dst and src. Same-dtype copies move raw bytes by element size.
#include <cstdint>
#include <cstring>

#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/detail/copy_cuda.h"
#include "dtensor/tensor/offset_calc_cuda.cuh"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {

namespace {

constexpr int kBlock = 256;

template <typename D, typename S>
__global__ void copy_kernel(char* dst, const char* src, OffsetCalc<2> calc, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[2];
    calc.get(i, off);
    *reinterpret_cast<D*>(dst + off[0]) = convert<D>(*reinterpret_cast<const S*>(src + off[1]));
  }
}

template <typename D, typename S>
void launch(char* dst, const char* src, const OffsetCalc<2>& calc, int64_t n) {
  copy_kernel<D, S>
      <<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(dst, src, calc, n);
}

template <typename U>
__global__ void fill_kernel(char* dst, OffsetCalc<1> calc, int64_t n, U v) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[1];
    calc.get(i, off);
    *reinterpret_cast<U*>(dst + off[0]) = v;
  }
}

template <typename U>
void launch_fill(char* dst, const OffsetCalc<1>& calc, int64_t n, uint64_t bits) {
  U v;
  std::memcpy(&v, &bits, sizeof(U));
  fill_kernel<U><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(dst, calc, n, v);
}

}  // namespace

void fill_cuda(const Tensor& dst, uint64_t bits) {
  DT_CHECK(dst.device().is_cuda() && dst.itemsize() <= 8,
           "[fill_] internal: fill_cuda needs a CUDA tensor of at most 8-byte elements");
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(dst.device().index);
  const auto calc = make_offset_calc<1>(dst.sizes(), {IntSpan(dst.strides())},
                                        {static_cast<int64_t>(dst.itemsize())});
  char* d = static_cast<char*>(dst.data_ptr());
  switch (dst.itemsize()) {
    case 1:
      launch_fill<uint8_t>(d, calc, n, bits);
      break;
    case 2:
      launch_fill<uint16_t>(d, calc, n, bits);
      break;
    case 4:
      launch_fill<uint32_t>(d, calc, n, bits);
      break;
    default:
      launch_fill<uint64_t>(d, calc, n, bits);
      break;
  }
  DT_CHECK_CUDA(cudaGetLastError());
}

void copy_cuda(const Tensor& dst, const Tensor& src) {
  DT_CHECK(dst.sizes() == src.sizes(), "[copy_] internal: shapes %s and %s differ",
           shape_str(dst.sizes()), shape_str(src.sizes()));
  DT_CHECK(dst.device().is_cuda() && dst.device() == src.device(),
           "[copy_] internal: copy_cuda needs tensors on one CUDA device (got %s and %s)",
           dst.device().str(), src.device().str());
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(dst.device().index);
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.data_ptr());
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    DT_CHECK_CUDA(
        cudaMemcpyAsync(d, s, dst.nbytes(), cudaMemcpyDeviceToDevice, cuda::current_stream()));
    return;
  }
  const auto calc = make_offset_calc<2>(
      dst.sizes(), {IntSpan(dst.strides()), IntSpan(src.strides())},
      {static_cast<int64_t>(dst.itemsize()), static_cast<int64_t>(src.itemsize())});
  if (dst.dtype() == src.dtype()) {
    switch (dst.itemsize()) {
      case 1:
        launch<uint8_t, uint8_t>(d, s, calc, n);
        break;
      case 2:
        launch<uint16_t, uint16_t>(d, s, calc, n);
        break;
      case 4:
        launch<uint32_t, uint32_t>(d, s, calc, n);
        break;
      default:
        launch<uint64_t, uint64_t>(d, s, calc, n);
        break;
    }
  } else {
    dispatch_dtype(dst.dtype(), [&]<typename D>() {
      dispatch_dtype(src.dtype(), [&]<typename S>() { launch<D, S>(d, s, calc, n); });
    });
  }
  DT_CHECK_CUDA(cudaGetLastError());
}

bool copy_cuda_compiled() {
  return true;
}

}  // namespace dtensor::detail
