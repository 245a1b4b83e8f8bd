// Block-wide reduction and row access for the row kernels of the ops layer (softmax, norms,
// reductions). Include only from .cu files.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

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

// A warp shuffle of any trivially copyable V (a struct travels as 32-bit words): lane ^ arg's
// value with kXor, lane arg's otherwise.
template <bool kXor, typename V>
__device__ __forceinline__ V warp_shuffle(V v, int arg) {
  const auto shfl = [arg](auto w) {
    return kXor ? __shfl_xor_sync(0xffffffffu, w, arg) : __shfl_sync(0xffffffffu, w, arg);
  };
  if constexpr (std::is_arithmetic_v<V> && sizeof(V) >= 4) {
    return shfl(v);
  } else {
    static_assert(std::is_trivially_copyable_v<V>);
    constexpr int kWords = (sizeof(V) + 3) / 4;
    unsigned int w[kWords] = {};
    memcpy(w, &v, sizeof(V));
#pragma unroll
    for (int k = 0; k < kWords; ++k) w[k] = shfl(w[k]);
    memcpy(&v, w, sizeof(V));
    return v;
  }
}

// Combines one value per thread of the block (blockDim.x a power of two from 32 to 1024) with
// `combine` and returns the result to every thread: a butterfly within each warp, the warps'
// results through `shm`, the same butterfly over them, and lane 0's value to the whole warp
// (two barriers, where a shared-memory tree over the block takes log2(blockDim.x)). The
// grouping is fixed, so the result is deterministic, and every thread gets the same bits even
// when `combine` is not symmetric in its ties (e.g. +0 and -0 under max). `shm` holds at least
// blockDim.x / 32 values; the call ends with a barrier, so `shm` can be reused right after.
template <typename V, typename Combine>
__device__ V block_reduce_all(V v, V* shm, Combine combine) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = combine(v, warp_shuffle<true>(v, o));
  const int warps = static_cast<int>(blockDim.x) / 32;
  if (warps > 1) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    if (lane == 0) shm[threadIdx.x / 32] = v;
    __syncthreads();
    v = shm[lane & (warps - 1)];
    for (int o = warps / 2; o > 0; o >>= 1) v = combine(v, warp_shuffle<true>(v, o));
    __syncthreads();
  }
  return warp_shuffle<false>(v, 0);
}

// Threads per block for a row of n elements: 32, 128 or 256.
inline int row_block_size(int64_t n) {
  if (n <= 32) return 32;
  if (n <= 128) return 128;
  return 256;
}

// Elements of T in one 16-byte access of a row kernel.
template <typename T>
inline constexpr int kRowVec = 16 / static_cast<int>(sizeof(T));

template <typename T>
struct alignas(16) RowVec {
  T v[kRowVec<T>];
};

// Whether rows of n elements starting at each of `ptrs` can take 16-byte accesses: every base
// 16-byte aligned and n a multiple of kRowVec<T> (so every row start is aligned too).
template <typename T, typename... P>
bool row_vectorizable(int64_t n, const P*... ptrs) {
  const bool aligned = ((ptrs == nullptr || reinterpret_cast<uintptr_t>(ptrs) % 16 == 0) && ...);
  return aligned && n % kRowVec<T> == 0;
}

// The elements of a row of n that this thread owns: with kVec, 16-byte groups of kRowVec<T>
// consecutive elements strided by the block; otherwise single elements strided by the block.
// f(i0) handles the group starting at element i0.
template <bool kVec, typename T, typename F>
__device__ __forceinline__ void row_groups(int64_t n, F&& f) {
  constexpr int kN = kVec ? kRowVec<T> : 1;
  for (int64_t k = threadIdx.x; k < n / kN; k += blockDim.x) f(k * kN);
}

template <bool kVec, typename T>
__device__ __forceinline__ RowVec<T> row_load(const T* x, int64_t i0) {
  RowVec<T> v;
  if constexpr (kVec) {
    v = *reinterpret_cast<const RowVec<T>*>(x + i0);
  } else {
    v.v[0] = x[i0];
  }
  return v;
}

template <bool kVec, typename T>
__device__ __forceinline__ void row_store(T* y, int64_t i0, const RowVec<T>& v) {
  if constexpr (kVec) {
    *reinterpret_cast<RowVec<T>*>(y + i0) = v;
  } else {
    y[i0] = v.v[0];
  }
}

// Calls f(i, x[i]) (or f(i, x[i], x2[i])) for the elements of a row of n that this thread owns
// (see row_groups).
template <bool kVec, typename T, typename F>
__device__ __forceinline__ void row_for_each(const T* x, int64_t n, F&& f) {
  constexpr int kN = kVec ? kRowVec<T> : 1;
  row_groups<kVec, T>(n, [&](int64_t i0) {
    const RowVec<T> v = row_load<kVec>(x, i0);
#pragma unroll
    for (int e = 0; e < kN; ++e) f(i0 + e, v.v[e]);
  });
}

template <bool kVec, typename T, typename F>
__device__ __forceinline__ void row_for_each(const T* x, const T* x2, int64_t n, F&& f) {
  constexpr int kN = kVec ? kRowVec<T> : 1;
  row_groups<kVec, T>(n, [&](int64_t i0) {
    const RowVec<T> v = row_load<kVec>(x, i0), v2 = row_load<kVec>(x2, i0);
#pragma unroll
    for (int e = 0; e < kN; ++e) f(i0 + e, v.v[e], v2.v[e]);
  });
}

// y[i] = f(i, x[i]) (or f(i, x[i], x2[i])) over a row of n, the elements owned as in
// row_groups.
template <bool kVec, typename T, typename F>
__device__ __forceinline__ void row_map(const T* x, T* y, int64_t n, F&& f) {
  constexpr int kN = kVec ? kRowVec<T> : 1;
  row_groups<kVec, T>(n, [&](int64_t i0) {
    const RowVec<T> v = row_load<kVec>(x, i0);
    RowVec<T> r;
#pragma unroll
    for (int e = 0; e < kN; ++e) r.v[e] = f(i0 + e, v.v[e]);
    row_store<kVec>(y, i0, r);
  });
}

template <bool kVec, typename T, typename F>
__device__ __forceinline__ void row_map(const T* x, const T* x2, T* y, int64_t n, F&& f) {
  constexpr int kN = kVec ? kRowVec<T> : 1;
  row_groups<kVec, T>(n, [&](int64_t i0) {
    const RowVec<T> v = row_load<kVec>(x, i0), v2 = row_load<kVec>(x2, i0);
    RowVec<T> r;
#pragma unroll
    for (int e = 0; e < kN; ++e) r.v[e] = f(i0 + e, v.v[e], v2.v[e]);
    row_store<kVec>(y, i0, r);
  });
}

}  // namespace dtensor::detail
