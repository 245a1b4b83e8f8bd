// CUDA kernels of advanced indexing on the [p, m, q] view of self and the [p, n, q] view of the
// result / values (advanced_index_cpu.cc builds the linear index and the views): one thread per
// result element. index_put without accumulate first picks, for each slot, the largest i naming
// it, then only that entry writes, so the winner is the CPU loop's (the last in the index's
// row-major order). The pick is a dense claim array of m slots (atomicMax of i + 1) when m is at
// most kSortRatio * n; for a larger indexed extent (x[i, j] = v on a huge self with few entries)
// it sorts the (slot, i) pairs with cub's stable radix sort instead and keeps the last pair of
// each run of equal slots, so the scratch is O(n), never O(m). With accumulate it adds
// atomically (floats round in an unspecified order; integers wrap); bool ORs (every writer
// stores 1, so no atomics are needed).
#include <bit>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "dtensor/ops/advanced_index/detail/advanced_index_cuda.h"
#include "dtensor/ops/common/detail/atomic_cuda.cuh"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/cuda_check.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

constexpr int kBlock = 256;
// index_put without accumulate sorts (slot, entry) pairs instead of claiming in a dense array of
// m slots when m > kSortRatio * n: the dense array costs 8 m bytes and an O(m) memset per call,
// the sort O(n) scratch and one pass over the 16 n bytes of pairs per radix digit (of
// bit_width(m) bits), so it only pays when m is well above n. (n entries of lin exist in memory,
// so kSortRatio * n cannot overflow.)
constexpr int64_t kSortRatio = 4;

// The gather / put kernels walk the [p, n, q] side element by element: element e belongs to
// entry i = (e / q) % n of lin and stands, when lin[i] names a slot l >= 0 of this block, at
// element (a * m + l) * q + b of the [p, m, q] side (a = e / (q n), b = e % q).
struct IndexedElement {
  int64_t i;    // the entry of lin
  int64_t pos;  // the element of the [p, m, q] side; -1 when lin[i] < 0
};
__device__ __forceinline__ IndexedElement indexed_element(const int64_t* lin, int64_t e, int64_t n,
                                                          int64_t m, int64_t q) {
  const int64_t b = e % q;
  const int64_t i = (e / q) % n;
  const int64_t a = e / (q * n);
  const int64_t l = lin[i];
  return {i, l < 0 ? int64_t{-1} : (a * m + l) * q + b};
}

template <typename U>
__global__ void index_gather_kernel(const U* self, const int64_t* lin, U* out, int64_t total,
                                    int64_t n, int64_t m, int64_t q) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t pos = indexed_element(lin, e, n, m, q).pos;
    out[e] = pos < 0 ? U(0) : self[pos];
  }
}

// Pass 1: slot l takes the largest i + 1 naming it.
__global__ void index_claim_kernel(const int64_t* lin, int64_t n, unsigned long long* claim) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (lin[i] >= 0) atomicMax(claim + lin[i], static_cast<unsigned long long>(i + 1));
  }
}

// Sorted pick, step 1: the sort's keys (the slot, or m for an entry outside this block, so those
// sort last) and values (the entry number).
__global__ void index_sort_input_kernel(const int64_t* lin, int64_t n, int64_t m,
                                        unsigned long long* keys, int64_t* entries) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    keys[i] = static_cast<unsigned long long>(lin[i] >= 0 ? lin[i] : m);
    entries[i] = i;
  }
}

// Sorted pick, step 2 (after a stable sort by slot, so each run of one slot lists its entries in
// increasing order): the last entry of each run wins its slot; every other entry gets -1.
// `winner` is indexed by entry (the sorted entries are a permutation, so each is written once).
__global__ void index_sort_pick_kernel(const unsigned long long* keys, const int64_t* entries,
                                       int64_t n, int64_t m, int64_t* winner) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < n; s += step) {
    const unsigned long long k = keys[s];
    const bool last = s + 1 == n || keys[s + 1] != k;
    winner[entries[s]] =
        last && k < static_cast<unsigned long long>(m) ? static_cast<int64_t>(k) : int64_t{-1};
  }
}

// Pass 2: the winning entry of each slot writes it (for every a, b). With `claim` null, `lin`
// already holds -1 for every entry but the winners (the sorted pick).
template <typename U>
__global__ void index_write_kernel(U* out, const int64_t* lin, const U* values,
                                   const unsigned long long* claim, int64_t total, int64_t n,
                                   int64_t m, int64_t q) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const IndexedElement x = indexed_element(lin, e, n, m, q);
    if (x.pos >= 0 &&
        (claim == nullptr || claim[lin[x.i]] == static_cast<unsigned long long>(x.i + 1))) {
      out[x.pos] = values[e];
    }
  }
}

// The entries of `lin` (n of them, slots in [0, m) or -1) that win their slot: an int64 tensor of
// n entries, the slot for the last entry naming it and -1 for every other, by a stable radix sort
// of the (slot, entry) pairs on the low bit_width(m) bits of the slot.
Tensor sorted_winners(const Tensor& lin, int64_t n, int64_t m, cudaStream_t stream) {
  const TensorOptions i64(kInt64, lin.device());
  Tensor keys_in = empty({n}, i64), keys_out = empty({n}, i64);
  Tensor entries_in = empty({n}, i64), entries_out = empty({n}, i64);
  auto* kin = static_cast<unsigned long long*>(keys_in.data_ptr());
  auto* kout = static_cast<unsigned long long*>(keys_out.data_ptr());
  auto* ein = static_cast<int64_t*>(entries_in.data_ptr());
  auto* eout = static_cast<int64_t*>(entries_out.data_ptr());
  const unsigned grid = cuda::grid_for(n, kBlock);
  index_sort_input_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const int64_t*>(lin.data_ptr()),
                                                       n, m, kin, ein);
  DT_CHECK_CUDA(cudaGetLastError());
  // Keys lie in [0, m] (m for "outside this block"): sort only the bits that m needs.
  const int end_bit = std::bit_width(static_cast<unsigned long long>(m));
  size_t temp_bytes = 0;
  DT_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, kin, kout, ein, eout, n, 0,
                                                end_bit, stream));
  const int64_t words = static_cast<int64_t>((temp_bytes + sizeof(int64_t) - 1) / sizeof(int64_t));
  Tensor temp = empty({words > 0 ? words : 1}, i64);
  DT_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), temp_bytes, kin, kout, ein, eout,
                                                n, 0, end_bit, stream));
  // keys_in is free once the sort has run (same stream): it receives the winners.
  auto* winner = static_cast<int64_t*>(keys_in.data_ptr());
  index_sort_pick_kernel<<<grid, kBlock, 0, stream>>>(kout, eout, n, m, winner);
  DT_CHECK_CUDA(cudaGetLastError());
  return keys_in;
}

template <typename T>
__global__ void index_add_kernel(T* out, const int64_t* lin, const T* values, int64_t total,
                                 int64_t n, int64_t m, int64_t q) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t pos = indexed_element(lin, e, n, m, q).pos;
    if (pos >= 0) atomic_add(out + pos, values[e]);
  }
}

}  // namespace

void index_gather_cuda(const Tensor& self, const Tensor& lin, const Tensor& out, int64_t p,
                       int64_t m, int64_t q) {
  cuda::DeviceGuard guard(self.device().index);
  const int64_t n = lin.numel(), total = p * n * q;
  if (total == 0) return;
  const auto* l = static_cast<const int64_t*>(lin.data_ptr());
  dispatch_bits(self.itemsize(), [&](auto tag) {
    using U = decltype(tag);
    index_gather_kernel<U><<<cuda::grid_for(total, kBlock), kBlock, 0, cuda::current_stream()>>>(
        static_cast<const U*>(self.data_ptr()), l, static_cast<U*>(out.data_ptr()), total, n, m, q);
  });
  DT_CHECK_CUDA(cudaGetLastError());
}

void index_put_cuda(const Tensor& out, const Tensor& lin, const Tensor& values, bool accumulate,
                    int64_t p, int64_t m, int64_t q) {
  cuda::DeviceGuard guard(out.device().index);
  const int64_t n = lin.numel(), total = p * n * q;
  if (total == 0 || m == 0) return;
  const auto* l = static_cast<const int64_t*>(lin.data_ptr());
  const unsigned grid = cuda::grid_for(total, kBlock);
  cudaStream_t stream = cuda::current_stream();
  if (!accumulate) {
    // Dense claims when m is small next to n, else the sorted pick (see kSortRatio). The
    // temporaries live until the write kernel is queued; the allocator's stream order keeps them
    // valid while it runs.
    Tensor claims, winners;
    const unsigned long long* claim = nullptr;
    if (m > kSortRatio * n) {
      winners = sorted_winners(lin, n, m, stream);
      l = static_cast<const int64_t*>(winners.data_ptr());
    } else {
      claims = zeros({m}, TensorOptions(kInt64, out.device()));
      auto* c = static_cast<unsigned long long*>(claims.data_ptr());
      index_claim_kernel<<<cuda::grid_for(n, kBlock), kBlock, 0, stream>>>(l, n, c);
      claim = c;
    }
    dispatch_bits(out.itemsize(), [&](auto tag) {
      using U = decltype(tag);
      index_write_kernel<U><<<grid, kBlock, 0, stream>>>(static_cast<U*>(out.data_ptr()), l,
                                                         static_cast<const U*>(values.data_ptr()),
                                                         claim, total, n, m, q);
    });
    DT_CHECK_CUDA(cudaGetLastError());
    return;
  }
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    index_add_kernel<T><<<grid, kBlock, 0, stream>>>(static_cast<T*>(out.data_ptr()), l,
                                                     static_cast<const T*>(values.data_ptr()),
                                                     total, n, m, q);
  };
  // 16-bit floats reach here accumulated in float32; bool accumulates as OR.
  if (out.dtype() == kBool) {
    launch(bool{});
  } else {
    dispatch_atomic_dtype(out.dtype(), "index_put", "accumulate", launch);
  }
  DT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace dtensor::detail
