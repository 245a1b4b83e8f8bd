// CUDA kernels of the random ops: the same per-element formula as the CPU path, from the same
// Philox words (element e of the global tensor reads words offset + e * W .. + W - 1).
//
// Fast path: when the local tensor is one contiguous run of the global tensor (dims that are
// contiguous in the global layout are merged first: a whole tensor, a dim-0 shard), one thread
// computes one Philox block (4 words) and writes every element whose words lie in it (4 / W of
// them), instead of one block per element; index math is one add. Otherwise one thread per
// element (grid-stride) maps its local index to the global one through the merged dims.
#include <cuda_runtime.h>

#include <cstdint>

#include "dtensor/rng/detail/cuda_launch.h"
#include "dtensor/rng/detail/distributions_impl.h"
#include "dtensor/rng/philox.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {

namespace {

struct Geom {
  int ndim;
  int64_t size[kRngMaxDims];
  int64_t gstride[kRngMaxDims];
  uint64_t gbase;
};

__device__ __forceinline__ uint64_t global_index(const Geom& g, int64_t e) {
  if (g.ndim == 1) return g.gbase + static_cast<uint64_t>(e * g.gstride[0]);
  uint64_t gi = g.gbase;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t i = e % g.size[d];
    e /= g.size[d];
    gi += static_cast<uint64_t>(i * g.gstride[d]);
  }
  return gi;
}

template <typename T, class Op>
__global__ void fill_kernel(Op op, T* out, Geom g, uint64_t seed, uint64_t offset, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    uint32_t w[Op::kWords];
    philox_words(seed, offset + global_index(g, e) * Op::kWords, Op::kWords, w);
    out[e] = op(w);
  }
}

// The contiguous run: element e reads words base + e * W (base % W == 0, W divides 4, so no
// element straddles two blocks). Thread j computes block (base >> 2) + j; positions are taken
// relative to base so that a word range wrapping past 2^64 gives philox_words's words.
template <typename T, class Op>
__global__ void fill_blocks_kernel(Op op, T* out, uint64_t seed, uint64_t base, int64_t n,
                                   int64_t nblocks) {
  constexpr int W = Op::kWords;
  constexpr int E = 4 / W;  // elements per block
  struct alignas(sizeof(T) * E) Pack {
    T v[E];
  };
  const uint64_t b0 = base >> 2;
  const int64_t lane0 = static_cast<int64_t>(base & 3);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < nblocks;
       j += step) {
    // Block numbers wrap as philox_words's do.
    const PhiloxBlock x =
        philox_stream_block(seed, (b0 + static_cast<uint64_t>(j)) & ((uint64_t{1} << 62) - 1));
    const int64_t rel = 4 * j - lane0;  // the block's first word, relative to base
    const int64_t e_first = rel > 0 ? rel / W : 0;
    const int64_t e_end = (rel + 4) / W;
    // A whole block's elements go out in one aligned vector store when they can (scalar stores
    // at a 4 / W stride would touch every sector 4 / W times).
    if (e_end - e_first == E && e_end <= n &&
        reinterpret_cast<uintptr_t>(out + e_first) % alignof(Pack) == 0) {
      Pack p;
#pragma unroll
      for (int k = 0; k < E; ++k) p.v[k] = op(&x.v[k * W]);
      *reinterpret_cast<Pack*>(out + e_first) = p;
      continue;
    }
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const int64_t e = e_first + k;
      if (e < e_end && e < n) out[e] = op(&x.v[e * W - rel]);
    }
  }
}

// Grid of a grid-stride launch of n threads' work at `threads` per block (capped).
int blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 65535 * 8 ? b : 65535 * 8);
}

template <typename T>
__global__ void dropout_kernel(const T* in, T* out, bool* mask, float scale_f, double scale_d,
                               uint64_t threshold, Geom g, uint64_t seed, uint64_t offset,
                               int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const bool keep = dropout_keep(philox_word(seed, offset + global_index(g, e)), threshold);
    if constexpr (sizeof(T) == 8) {
      out[e] = keep ? in[e] * scale_d : 0.0;
    } else {
      out[e] = T(keep ? static_cast<float>(in[e]) * scale_f : 0.0f);
    }
    if (mask) mask[e] = keep;
  }
}

template <typename T, class Op>
void launch_fill(const RngLaunch& l, const Op& op, const Geom& g) {
  const int threads = 256;
  constexpr uint64_t W = Op::kWords;
  static_assert(4 % W == 0, "Philox words per element must divide a block");
  if (g.ndim == 1 && g.gstride[0] == 1 && l.offset % W == 0) {
    const uint64_t base = l.offset + g.gbase * W;
    const int64_t nblocks =
        static_cast<int64_t>(((base & 3) + static_cast<uint64_t>(l.numel) * W + 3) / 4);
    fill_blocks_kernel<T, Op><<<blocks_for(nblocks, threads), threads, 0, cuda::current_stream()>>>(
        op, static_cast<T*>(l.out), l.seed, base, l.numel, nblocks);
    return;
  }
  fill_kernel<T, Op><<<blocks_for(l.numel, threads), threads, 0, cuda::current_stream()>>>(
      op, static_cast<T*>(l.out), g, l.seed, l.offset, l.numel);
}

template <typename T>
const char* fill_typed(const RngLaunch& l, const Geom& g) {
  using C = compute_t<T>;
  constexpr bool kFloating = !std::is_integral_v<T>;
  switch (l.kind) {
    case 0:
      if constexpr (kFloating) {
        launch_fill<T>(l, UniformOp<T>{static_cast<C>(l.a), static_cast<C>(l.b)}, g);
        return nullptr;
      }
      break;
    case 1:
      if constexpr (kFloating) {
        launch_fill<T>(l, NormalOp<T>{static_cast<C>(l.a), static_cast<C>(l.b)}, g);
        return nullptr;
      }
      break;
    case 2:
      launch_fill<T>(l, BernoulliOp<T>{l.threshold}, g);
      return nullptr;
    case 3:
      if constexpr (!std::is_same_v<T, bool>) {
        launch_fill<T>(l, RandintOp<T>{l.int_low, l.int_range}, g);
        return nullptr;
      }
      break;
    case 4:
      if constexpr (kFloating) {
        launch_fill<T>(l, DropoutMaskOp<T>{l.threshold, static_cast<C>(l.a)}, g);
        return nullptr;
      }
      break;
    case -1:
      if constexpr (kFloating) {
        const int threads = 256;
        dropout_kernel<T><<<blocks_for(l.numel, threads), threads, 0, cuda::current_stream()>>>(
            static_cast<const T*>(l.in), static_cast<T*>(l.out), l.mask, static_cast<float>(l.a),
            l.a, l.threshold, g, l.seed, l.offset, l.numel);
        return nullptr;
      }
      break;
    default:
      break;
  }
  return "unsupported distribution / dtype combination";
}

}  // namespace

bool rng_cuda_compiled() {
  return true;
}

const char* rng_cuda_launch(const RngLaunch& l) {
  if (l.numel == 0) return nullptr;
  int prev = 0;
  cudaError_t err = cudaGetDevice(&prev);
  if (err == cudaSuccess && prev != l.device) err = cudaSetDevice(l.device);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  // Local dims, size-1 dims dropped and neighbours merged where the global layout is
  // contiguous across them (d's global stride = d+1's stride * d+1's size): same element order.
  Geom g{};
  for (int d = 0; d < l.ndim; ++d) {
    if (l.size[d] == 1) continue;
    if (g.ndim > 0 && g.gstride[g.ndim - 1] == l.gstride[d] * l.size[d]) {
      g.size[g.ndim - 1] *= l.size[d];
      g.gstride[g.ndim - 1] = l.gstride[d];
    } else {
      g.size[g.ndim] = l.size[d];
      g.gstride[g.ndim] = l.gstride[d];
      ++g.ndim;
    }
  }
  if (g.ndim == 0) {  // a single element (or all dims of size 1)
    g.ndim = 1;
    g.size[0] = 1;
    g.gstride[0] = 1;
  }
  g.gbase = l.gbase;
  const char* msg = nullptr;
  switch (l.dtype) {
    case RngDType::kFloat32:
      msg = fill_typed<float>(l, g);
      break;
    case RngDType::kFloat64:
      msg = fill_typed<double>(l, g);
      break;
    case RngDType::kFloat16:
      msg = fill_typed<Half>(l, g);
      break;
    case RngDType::kBFloat16:
      msg = fill_typed<BFloat16>(l, g);
      break;
    case RngDType::kInt32:
      msg = fill_typed<int32_t>(l, g);
      break;
    case RngDType::kInt64:
      msg = fill_typed<int64_t>(l, g);
      break;
    case RngDType::kBool:
      msg = fill_typed<bool>(l, g);
      break;
  }
  if (msg == nullptr) {
    err = cudaGetLastError();
    if (err != cudaSuccess) msg = cudaGetErrorString(err);
  }
  if (prev != l.device) cudaSetDevice(prev);
  return msg;
}

}  // namespace dtensor::detail
