// Block-wide reduction for the row kernels of the ops layer (softmax, norms). Include only from
// .cu files.
#pragma once

namespace dtensor::detail {

// The launch's dynamic shared memory as an array of V: the scratch block_reduce_all needs
// (launch with at least blockDim.x * sizeof(V) bytes).
template <typename V>
__device__ V* block_scratch() {
  extern __shared__ __align__(16) unsigned char block_scratch_bytes[];
  return reinterpret_cast<V*>(block_scratch_bytes);
}

// a + b, as block_reduce_all's combine.
struct BlockSum {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return a + b;
  }
};

// Combines one value per thread of the block (blockDim.x a power of two, at most 1024) with
// `combine` and returns the result to every thread. `shm` holds blockDim.x values; the call
// ends with a barrier, so `shm` can be reused right after.
template <typename V, typename Combine>
__device__ V block_reduce_all(V v, V* shm, Combine combine) {
  const int t = threadIdx.x;
  shm[t] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) shm[t] = combine(shm[t], shm[t + s]);
    __syncthreads();
  }
  const V r = shm[0];
  __syncthreads();
  return r;
}

// Threads per block for a row of n elements: 32, 128 or 256.
inline int row_block_size(int64_t n) {
  if (n <= 32) return 32;
  if (n <= 128) return 128;
  return 256;
}

}  // namespace dtensor::detail
