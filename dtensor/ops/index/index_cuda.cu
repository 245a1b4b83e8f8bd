// CUDA gather, scatter, scatter-add and scatter-reduce along one dim: one thread per index
// element. Positions are unravelled from the index's row-major order (at most kMaxDims dims);
// scatter-add uses atomicAdd and scatter-reduce atomicAdd or compare-and-swap loops, so callers
// pass 32/64-bit types (16-bit types are accumulated in float32).
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "dtensor/ops/common/detail/atomic_cuda.cuh"
#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/index/detail/index_cuda.h"
#include "dtensor/ops/index/detail/scatter_reduce_math.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

constexpr int kBlock = 256;
constexpr int kMaxDims = 8;

struct Geometry {
  int ndim;
  int dim;
  int64_t index_shape[kMaxDims];
  int64_t target_strides[kMaxDims];  // contiguous strides of the indexed tensor
  int64_t size;                      // target.size(dim)
};

Geometry geometry(const Tensor& index, const Tensor& target, int64_t dim, const char* op) {
  DT_CHECK(index.dim() <= kMaxDims, "[%s] CUDA indexing supports at most %d dims, got %d", op,
           kMaxDims, index.dim());
  Geometry g{};
  g.ndim = static_cast<int>(index.dim());
  g.dim = static_cast<int>(dim);
  const Shape strides = contiguous_strides(target.sizes());
  for (int k = 0; k < g.ndim; ++k) {
    g.index_shape[k] = index.size(k);
    g.target_strides[k] = strides[k];
  }
  g.size = target.size(dim);
  return g;
}

// Element offset in the target of index position p, without the dim term.
__device__ int64_t base_offset(const Geometry& g, int64_t p) {
  int64_t base = 0;
  for (int k = g.ndim - 1; k >= 0; --k) {
    const int64_t c = p % g.index_shape[k];
    p /= g.index_shape[k];
    if (k != g.dim) base += c * g.target_strides[k];
  }
  return base;
}

template <typename U>
__global__ void gather_kernel(Geometry g, const int64_t* idx, const U* self, U* out, int64_t n,
                              unsigned long long* bad) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += step) {
    const int64_t r = idx[p];
    if (r < 0 || r >= g.size) {
      if (atomicCAS(&bad[0], 0ull, 1ull) == 0ull) bad[1] = static_cast<unsigned long long>(r);
      continue;
    }
    out[p] = self[base_offset(g, p) + r * g.target_strides[g.dim]];
  }
}

// The target element of index position p (index - offset along dim), or -1 when it falls
// outside the target: then, unless `masked`, the first such index is recorded in bad[1].
__device__ int64_t target_slot(const Geometry& g, const int64_t* idx, int64_t p, int64_t offset,
                               bool masked, unsigned long long* bad) {
  const int64_t r = idx[p] - offset;
  if (r < 0 || r >= g.size) {
    if (!masked && atomicCAS(&bad[0], 0ull, 1ull) == 0ull) {
      bad[1] = static_cast<unsigned long long>(idx[p]);
    }
    return -1;
  }
  return base_offset(g, p) + r * g.target_strides[g.dim];
}

// Calls f(at, p) for each index position p of this thread's grid stride whose target slot `at`
// (target_slot) is in range.
template <typename F>
__device__ void for_each_target(const Geometry& g, const int64_t* idx, int64_t n, int64_t offset,
                                bool masked, unsigned long long* bad, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += step) {
    const int64_t at = target_slot(g, idx, p, offset, masked, bad);
    if (at >= 0) f(at, p);
  }
}

template <typename T>
__global__ void scatter_add_kernel(Geometry g, const int64_t* idx, const T* src, T* out, int64_t n,
                                   int64_t offset, bool masked, unsigned long long* bad) {
  for_each_target(g, idx, n, offset, masked, bad,
                  [=](int64_t at, int64_t p) { atomic_add(out + at, src[p]); });
}

// Scatter, pass 1: every in-range entry claims its target slot with its position + 1; the
// largest (the last in row-major index order) wins.
__global__ void scatter_claim_kernel(Geometry g, const int64_t* idx, int64_t n, int64_t offset,
                                     bool masked, unsigned long long* bad,
                                     unsigned long long* claim) {
  for_each_target(g, idx, n, offset, masked, bad, [=](int64_t at, int64_t p) {
    atomicMax(claim + at, static_cast<unsigned long long>(p + 1));
  });
}

// Scatter, pass 2: the winning entry of each slot writes it.
template <typename U>
__global__ void scatter_write_kernel(Geometry g, const int64_t* idx, const U* src, U* out,
                                     int64_t n, int64_t offset, const unsigned long long* claim) {
  for_each_target(g, idx, n, offset, /*masked=*/true, nullptr, [=](int64_t at, int64_t p) {
    if (claim[at] == static_cast<unsigned long long>(p + 1)) out[at] = src[p];
  });
}

// ---- scatter_reduce ----------------------------------------------------------------------------
// Bits of the same size as T (for compare-and-swap).
template <typename T>
using Bits = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;

// *addr = f(*addr, v) atomically: a compare-and-swap loop on the element's bits (exact for any
// f; compares bits, so a NaN value does not loop forever).
template <typename T, typename F>
__device__ void atomic_update(T* addr, T v, F f) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic_update takes 4- or 8-byte types");
  using B = Bits<T>;
  B* a = reinterpret_cast<B*>(addr);
  B old = *reinterpret_cast<volatile B*>(a);
  while (true) {
    T cur;
    memcpy(&cur, &old, sizeof(T));
    const T next = f(cur, v);
    B want;
    memcpy(&want, &next, sizeof(T));
    if (want == old) return;
    const B seen = atomicCAS(a, old, want);
    if (seen == old) return;
    old = seen;
  }
}

// The reductions, applied atomically to one slot (the element rules: scatter_reduce_math.h).
struct SumUpdate {
  template <typename T>
  __device__ void operator()(T* p, T v) const {
    atomic_add(p, v);
  }
};
template <typename Combine>
struct CasUpdate {
  template <typename T>
  __device__ void operator()(T* p, T v) const {
    atomic_update(p, v, Combine{});
  }
};

// Pass 1 (mean, or without include_self): how many in-range entries name each slot.
__global__ void scatter_count_kernel(Geometry g, const int64_t* idx, int64_t n, int64_t offset,
                                     bool masked, unsigned long long* bad,
                                     unsigned long long* count) {
  for_each_target(g, idx, n, offset, masked, bad,
                  [=](int64_t at, int64_t) { atomicAdd(count + at, 1ull); });
}

// Calls f(i) for each slot i of this thread's grid stride that some in-range entry named
// (count[i] > 0, counted by scatter_count_kernel).
template <typename F>
__device__ void for_each_named_slot(const unsigned long long* count, int64_t numel, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += step) {
    if (count[i] > 0) f(i);
  }
}

// Without include_self: the slots an entry names start from the reduction's identity.
template <typename T>
__global__ void scatter_identity_kernel(T* out, const unsigned long long* count, int64_t numel,
                                        T identity) {
  for_each_named_slot(count, numel, [=](int64_t i) { out[i] = identity; });
}

// Pass 2: every in-range entry reduces into its slot.
template <typename T, typename Update>
__global__ void scatter_reduce_kernel(Geometry g, const int64_t* idx, const T* src, T* out,
                                      int64_t n, int64_t offset, bool masked,
                                      unsigned long long* bad, Update update) {
  for_each_target(g, idx, n, offset, masked, bad,
                  [=](int64_t at, int64_t p) { update(out + at, src[p]); });
}

// Mean, pass 3: the slots some entry named divide by their count (+ 1 with include_self); floor
// division for integers.
template <typename T>
__global__ void scatter_mean_kernel(T* out, const unsigned long long* count, int64_t numel,
                                    int64_t extra) {
  for_each_named_slot(count, numel, [=](int64_t i) {
    out[i] = scatter_mean(out[i], static_cast<int64_t>(count[i]) + extra);
  });
}

// What every entry point below starts with, on the target's device: the index geometry, the
// out-of-range flag the kernels set ([0] nonzero, [1] the index) and the index's elements.
struct IndexLaunch {
  IndexLaunch(const Tensor& index, const Tensor& target, int64_t dim, const char* op)
      : g(geometry(index, target, dim, op)),
        guard(target.device().index),
        flag(zeros({2}, TensorOptions(kInt64, target.device()))),
        bad(static_cast<unsigned long long*>(flag.data_ptr())),
        n(index.numel()),
        idx(static_cast<const int64_t*>(index.data_ptr())) {}

  // Reads the out-of-range flag back (synchronises the stream) and raises.
  void raise_if_bad(const char* op, int64_t dim) const {
    const Tensor host = flag.to(Device(kCPU));
    const int64_t* f = host.data<int64_t>();
    DT_CHECK(f[0] == 0, "[%s] index %d out of range for dim %d of size %d", op, f[1], dim, g.size);
  }

  const Geometry g;
  cuda::DeviceGuard guard;
  const Tensor flag;
  unsigned long long* const bad;
  const int64_t n;
  const int64_t* const idx;
};

}  // namespace

void gather_cuda(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out) {
  const IndexLaunch l(index, self, dim, "gather");
  auto launch = [&](auto tag) {
    using U = decltype(tag);
    gather_kernel<U><<<cuda::grid_for(l.n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        l.g, l.idx, static_cast<const U*>(self.data_ptr()), static_cast<U*>(out.data_ptr()), l.n,
        l.bad);
  };
  dispatch_bits(self.itemsize(), launch);  // elements move as raw bits
  l.raise_if_bad("gather", dim);
}

void scatter_add_cuda(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                      int64_t offset, bool masked, const char* op) {
  const IndexLaunch l(index, out, dim, op);
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    scatter_add_kernel<T><<<cuda::grid_for(l.n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        l.g, l.idx, static_cast<const T*>(src.data_ptr()), static_cast<T*>(out.data_ptr()), l.n,
        offset, masked, l.bad);
  };
  dispatch_atomic_dtype(out.dtype(), op, "scatter-add", launch);
  if (!masked) l.raise_if_bad(op, dim);
}

void scatter_cuda(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                  int64_t offset, bool masked, const char* op) {
  const IndexLaunch l(index, out, dim, op);
  Tensor claims = zeros({out.numel()}, TensorOptions(kInt64, out.device()));
  auto* claim = static_cast<unsigned long long*>(claims.data_ptr());
  scatter_claim_kernel<<<cuda::grid_for(l.n, kBlock), kBlock, 0, cuda::current_stream()>>>(
      l.g, l.idx, l.n, offset, masked, l.bad, claim);
  auto launch = [&](auto tag) {
    using U = decltype(tag);
    scatter_write_kernel<U><<<cuda::grid_for(l.n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        l.g, l.idx, static_cast<const U*>(src.data_ptr()), static_cast<U*>(out.data_ptr()), l.n,
        offset, claim);
  };
  dispatch_bits(out.itemsize(), launch);  // elements move as raw bits
  if (!masked) l.raise_if_bad(op, dim);
}

void scatter_reduce_cuda(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                         int64_t offset, bool masked, ScatterReduceOp reduce, bool include_self,
                         const char* op) {
  const IndexLaunch l(index, out, dim, op);
  const int64_t numel = out.numel();
  const bool counts = reduce == ScatterReduceOp::kMean || !include_self;
  Tensor count_t;
  unsigned long long* count = nullptr;
  if (counts) {
    count_t = zeros({numel}, TensorOptions(kInt64, out.device()));
    count = static_cast<unsigned long long*>(count_t.data_ptr());
    scatter_count_kernel<<<cuda::grid_for(l.n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        l.g, l.idx, l.n, offset, masked, l.bad, count);
  }
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data_ptr());
    const T* v = static_cast<const T*>(src.data_ptr());
    if (!include_self) {
      T identity{};
      switch (reduce) {
        case ScatterReduceOp::kSum:
        case ScatterReduceOp::kMean:
          identity = T(0);
          break;
        case ScatterReduceOp::kProd:
          identity = T(1);
          break;
        case ScatterReduceOp::kAmax:
          identity = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                          : std::numeric_limits<T>::lowest();
          break;
        case ScatterReduceOp::kAmin:
          identity = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                          : std::numeric_limits<T>::max();
          break;
      }
      scatter_identity_kernel<T>
          <<<cuda::grid_for(numel, kBlock), kBlock, 0, cuda::current_stream()>>>(o, count, numel,
                                                                                 identity);
    }
    auto reduce_with = [&](auto update) {
      scatter_reduce_kernel<T, decltype(update)>
          <<<cuda::grid_for(l.n, kBlock), kBlock, 0, cuda::current_stream()>>>(
              l.g, l.idx, v, o, l.n, offset, masked, l.bad, update);
    };
    switch (reduce) {
      case ScatterReduceOp::kSum:
      case ScatterReduceOp::kMean:
        reduce_with(SumUpdate{});
        break;
      case ScatterReduceOp::kProd:
        reduce_with(CasUpdate<ScatterCombineProd>{});
        break;
      case ScatterReduceOp::kAmax:
        reduce_with(CasUpdate<ScatterCombineMax>{});
        break;
      case ScatterReduceOp::kAmin:
        reduce_with(CasUpdate<ScatterCombineMin>{});
        break;
    }
    if (reduce == ScatterReduceOp::kMean) {
      scatter_mean_kernel<T><<<cuda::grid_for(numel, kBlock), kBlock, 0, cuda::current_stream()>>>(
          o, count, numel, include_self ? 1 : 0);
    }
  };
  dispatch_atomic_dtype(out.dtype(), op, "scatter_reduce", launch);
  if (!masked) l.raise_if_bad(op, dim);
}

}  // namespace dtensor::detail
