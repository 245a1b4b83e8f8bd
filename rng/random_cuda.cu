// CUDA kernels of the random ops: one thread per element (grid-stride), each computing its
// global index, its Philox words and the same per-element formula as the CPU path.
#include <cuda_runtime.h>

#include "rng/cuda_launch.h"
#include "rng/distributions_impl.h"
#include "rng/philox.h"

namespace dtensor::detail {

namespace {

struct Geom {
  int ndim;
  int64_t size[kRngMaxDims];
  int64_t gstride[kRngMaxDims];
  uint64_t gbase;
};

__device__ __forceinline__ uint64_t global_index(const Geom& g, int64_t e) {
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
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    uint32_t w[Op::kWords];
    philox_words(seed, offset + global_index(g, e) * Op::kWords, Op::kWords, w);
    out[e] = op(w);
  }
}

template <typename T>
__global__ void dropout_kernel(const T* in, T* out, bool* mask, float scale_f, double scale_d,
                               uint64_t threshold, Geom g, uint64_t seed, uint64_t offset,
                               int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
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
  const int64_t blocks64 = (l.numel + threads - 1) / threads;
  const int blocks = static_cast<int>(blocks64 < 65535 * 8 ? blocks64 : 65535 * 8);
  fill_kernel<T, Op><<<blocks, threads>>>(op, static_cast<T*>(l.out), g, l.seed, l.offset,
                                          l.numel);
}

template <typename T>
const char* fill_typed(const RngLaunch& l, const Geom& g) {
  using C = typename RngCompute<T>::type;
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
        const int64_t blocks64 = (l.numel + threads - 1) / threads;
        const int blocks = static_cast<int>(blocks64 < 65535 * 8 ? blocks64 : 65535 * 8);
        dropout_kernel<T><<<blocks, threads>>>(
            static_cast<const T*>(l.in), static_cast<T*>(l.out), l.mask,
            static_cast<float>(l.a), l.a, l.threshold, g, l.seed, l.offset, l.numel);
        return nullptr;
      }
      break;
    default: break;
  }
  return "unsupported distribution / dtype combination";
}

}  // namespace

bool rng_cuda_compiled() { return true; }

const char* rng_cuda_launch(const RngLaunch& l) {
  if (l.numel == 0) return nullptr;
  int prev = 0;
  cudaError_t err = cudaGetDevice(&prev);
  if (err == cudaSuccess && prev != l.device) err = cudaSetDevice(l.device);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  Geom g{};
  g.ndim = l.ndim;
  for (int d = 0; d < l.ndim; ++d) {
    g.size[d] = l.size[d];
    g.gstride[d] = l.gstride[d];
  }
  g.gbase = l.gbase;
  const char* msg = nullptr;
  switch (l.dtype) {
    case RngDType::kFloat32: msg = fill_typed<float>(l, g); break;
    case RngDType::kFloat64: msg = fill_typed<double>(l, g); break;
    case RngDType::kFloat16: msg = fill_typed<Half>(l, g); break;
    case RngDType::kBFloat16: msg = fill_typed<BFloat16>(l, g); break;
    case RngDType::kInt32: msg = fill_typed<int32_t>(l, g); break;
    case RngDType::kInt64: msg = fill_typed<int64_t>(l, g); break;
    case RngDType::kBool: msg = fill_typed<bool>(l, g); break;
  }
  if (msg == nullptr) {
    err = cudaGetLastError();
    if (err != cudaSuccess) msg = cudaGetErrorString(err);
  }
  if (prev != l.device) cudaSetDevice(prev);
  return msg;
}

}  // namespace dtensor::detail
