// CUDA flatnonzero (the data-dependent step of masked_select / nonzero) and nonzero's unravel.
// flatnonzero: each block of kBlock threads owns a tile of kBlock * kItems consecutive flags
// (thread t its kItems consecutive ones); pass 1 counts each tile's trues, the host turns the
// tile counts into exclusive offsets (their sum is the result's size, which must be known to
// allocate it), pass 2 scans the thread counts inside the tile in shared memory and writes each
// true position at tile offset + its rank, so the positions come out in row-major order.
#include <cstdint>
#include <vector>

#include "dtensor/ops/masked_select/detail/masked_select_cuda.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

constexpr int kBlock = 256;
constexpr int kItems = 8;
constexpr int64_t kTile = int64_t{kBlock} * kItems;
constexpr int kMaxDims = 16;

// The number of trues among thread t's items of tile `tile`.
__device__ int thread_count(const bool* flags, int64_t n, int64_t tile) {
  const int64_t first = tile * kTile + static_cast<int64_t>(threadIdx.x) * kItems;
  int c = 0;
  for (int k = 0; k < kItems; ++k) {
    const int64_t i = first + k;
    if (i < n && flags[i]) ++c;
  }
  return c;
}

// Exclusive prefix sum of `v` over the block's threads (Hillis-Steele in shared memory); the
// block total in *total.
__device__ int block_exclusive_scan(int v, int* total) {
  __shared__ int buf[kBlock];
  const int t = threadIdx.x;
  buf[t] = v;
  __syncthreads();
  for (int off = 1; off < kBlock; off <<= 1) {
    const int add = t >= off ? buf[t - off] : 0;
    __syncthreads();
    buf[t] += add;
    __syncthreads();
  }
  const int inclusive = buf[t];
  if (total != nullptr && t == kBlock - 1) *total = inclusive;
  __syncthreads();
  return inclusive - v;
}

__global__ void count_kernel(const bool* flags, int64_t n, int64_t tiles, int64_t* counts) {
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    __shared__ int total;
    block_exclusive_scan(thread_count(flags, n, tile), &total);
    if (threadIdx.x == 0) counts[tile] = total;
    __syncthreads();
  }
}

__global__ void compact_kernel(const bool* flags, int64_t n, int64_t tiles, const int64_t* offsets,
                               int64_t* out) {
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int rank = block_exclusive_scan(thread_count(flags, n, tile), nullptr);
    int64_t at = offsets[tile] + rank;
    const int64_t first = tile * kTile + static_cast<int64_t>(threadIdx.x) * kItems;
    for (int k = 0; k < kItems; ++k) {
      const int64_t i = first + k;
      if (i < n && flags[i]) out[at++] = i;
    }
  }
}

struct Dims {
  int ndim;
  int64_t size[kMaxDims];
};

__global__ void unravel_kernel(const int64_t* linear, int64_t n, Dims dims, int64_t* out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += step) {
    int64_t p = linear[k];
    for (int d = dims.ndim - 1; d >= 0; --d) {
      out[k * dims.ndim + d] = p % dims.size[d];
      p /= dims.size[d];
    }
  }
}

unsigned int tile_grid(int64_t tiles) {
  const int64_t cap = int64_t{1} << 16;
  return static_cast<unsigned int>(tiles < 1 ? 1 : (tiles > cap ? cap : tiles));
}

}  // namespace

Tensor flatnonzero_cuda(const Tensor& flags) {
  cuda::DeviceGuard guard(flags.device().index);
  const TensorOptions opts(kInt64, flags.device());
  const int64_t n = flags.numel();
  const int64_t tiles = (n + kTile - 1) / kTile;
  if (tiles == 0) return empty({0}, opts);
  const auto* f = static_cast<const bool*>(flags.data_ptr());
  Tensor counts = empty({tiles}, opts);
  count_kernel<<<tile_grid(tiles), kBlock, 0, cuda::current_stream()>>>(f, n, tiles,
                                                                        counts.data<int64_t>());
  DT_CHECK_CUDA(cudaGetLastError());
  // Exclusive offsets of the tiles on the host (synchronises: the total sizes the result).
  const Tensor host = counts.to(Device(kCPU));
  std::vector<int64_t> offsets(static_cast<size_t>(tiles));
  int64_t total = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    offsets[t] = total;
    total += host.data<int64_t>()[t];
  }
  Tensor out = empty({total}, opts);
  if (total == 0) return out;
  const Tensor dev_offsets = from_vector(offsets, {tiles}, flags.device());
  compact_kernel<<<tile_grid(tiles), kBlock, 0, cuda::current_stream()>>>(
      f, n, tiles, dev_offsets.data<int64_t>(), out.data<int64_t>());
  DT_CHECK_CUDA(cudaGetLastError());
  return out;
}

void unravel_cuda(const Tensor& linear, IntSpan shape, const Tensor& out) {
  DT_CHECK(static_cast<int64_t>(shape.size()) <= kMaxDims,
           "[nonzero] CUDA nonzero supports at most %d dims, got %d", kMaxDims, shape.size());
  cuda::DeviceGuard guard(out.device().index);
  Dims dims{};
  dims.ndim = static_cast<int>(shape.size());
  for (int d = 0; d < dims.ndim; ++d) dims.size[d] = shape[d];
  const int64_t n = linear.numel();
  if (n == 0) return;
  unravel_kernel<<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
      linear.data<int64_t>(), n, dims, out.data<int64_t>());
  DT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace dtensor::detail
