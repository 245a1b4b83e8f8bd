// Kernels of the NCCL backend's NaN-propagating max / min (nan_minmax.h): one thread per
// element, grid-stride, on the backend's stream.
#include "dtensor/collectives/nccl/detail/minmax_keys.h"
#include "dtensor/collectives/nccl/nan_minmax.h"
#include "dtensor/tensor/cuda_check.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

constexpr int kBlock = 256;

template <typename Bits, typename Key>
__global__ void to_keys_kernel(const Bits* x, Key* keys, int64_t n, Bits inf_bits, bool is_max) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    keys[i] = minmax_key<Key>(x[i], inf_bits, is_max);
  }
}

template <typename Bits, typename Key>
__global__ void from_keys_kernel(const Key* keys, Bits* out, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = minmax_bits<Bits>(keys[i]);
  }
}

template <typename Bits, typename Key>
void to_keys(const void* x, void* keys, int64_t n, Bits inf_bits, bool is_max, cudaStream_t s) {
  to_keys_kernel<Bits, Key><<<cuda::grid_for(n, kBlock), kBlock, 0, s>>>(
      static_cast<const Bits*>(x), static_cast<Key*>(keys), n, inf_bits, is_max);
  DT_CHECK_CUDA(cudaGetLastError());
}

template <typename Bits, typename Key>
void from_keys(const void* keys, void* out, int64_t n, cudaStream_t s) {
  from_keys_kernel<Bits, Key><<<cuda::grid_for(n, kBlock), kBlock, 0, s>>>(
      static_cast<const Key*>(keys), static_cast<Bits*>(out), n);
  DT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace

bool minmax_needs_keys(DType dtype, bool is_min_or_max) {
  return is_min_or_max && (dtype == DType::kFloat32 || dtype == DType::kFloat64 ||
                           dtype == DType::kFloat16 || dtype == DType::kBFloat16);
}

DType minmax_key_dtype(DType dtype) {
  return dtype == DType::kFloat64 ? DType::kInt64 : DType::kInt32;
}

void minmax_to_keys(const void* x, void* keys, int64_t n, DType dtype, bool is_max,
                    cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat32:
      return to_keys<uint32_t, int32_t>(x, keys, n, kInfBitsFloat, is_max, stream);
    case DType::kFloat64:
      return to_keys<uint64_t, int64_t>(x, keys, n, kInfBitsDouble, is_max, stream);
    case DType::kFloat16:
      return to_keys<uint16_t, int32_t>(x, keys, n, kInfBitsHalf, is_max, stream);
    case DType::kBFloat16:
      return to_keys<uint16_t, int32_t>(x, keys, n, kInfBitsBFloat16, is_max, stream);
    default:
      DT_FAIL("[nccl] internal: no max / min keys for dtype %s", dtype_name(dtype));
  }
}

void minmax_from_keys(const void* keys, void* out, int64_t n, DType dtype, cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat32:
      return from_keys<uint32_t, int32_t>(keys, out, n, stream);
    case DType::kFloat64:
      return from_keys<uint64_t, int64_t>(keys, out, n, stream);
    case DType::kFloat16:
    case DType::kBFloat16:
      return from_keys<uint16_t, int32_t>(keys, out, n, stream);
    default:
      DT_FAIL("[nccl] internal: no max / min keys for dtype %s", dtype_name(dtype));
  }
}

}  // namespace dtensor::detail
