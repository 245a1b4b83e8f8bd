// CUDA batch_norm_sums and batch_norm_affine with their backwards: one block per channel
// accumulating float64 sums over the channel's n * l elements (shared-memory tree reduction:
// x and x^2; g * x and g), and grid-stride elementwise kernels (the sums' gradient; y = x *
// scale + shift with the multiply and the add rounded separately, as on the CPU: __fmul_rn /
// __fadd_rn keep nvcc from fusing them; g * scale).
#include "dtensor/ops/norm/detail/batch_norm_kernels.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

constexpr int kThreads = 256;

// Per channel k (one block per channel, grid-stride over the channels): visit(at, a, b) for
// every element index `at` of channel k, accumulating two float64 sums per thread, reduced in
// shared memory into out[k] and out[c + k].
template <typename Visit>
__device__ void channel_sums(int64_t n, int64_t c, int64_t l, double* out, const Visit& visit) {
  __shared__ double a_sh[kThreads];
  __shared__ double b_sh[kThreads];
  for (int64_t k = blockIdx.x; k < c; k += gridDim.x) {
    double a = 0, b = 0;
    for (int64_t e = threadIdx.x; e < n * l; e += blockDim.x) {
      visit(((e / l) * c + k) * l + e % l, k, a, b);
    }
    a_sh[threadIdx.x] = a;
    b_sh[threadIdx.x] = b;
    __syncthreads();
    for (int h = kThreads / 2; h > 0; h /= 2) {
      if (threadIdx.x < h) {
        a_sh[threadIdx.x] += a_sh[threadIdx.x + h];
        b_sh[threadIdx.x] += b_sh[threadIdx.x + h];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      out[k] = a_sh[0];
      out[c + k] = b_sh[0];
    }
    __syncthreads();
  }
}

template <typename T>
struct SumsVisit {
  const T* x;
  __device__ void operator()(int64_t at, int64_t, double& s, double& q) const {
    const double v = static_cast<double>(x[at]);
    s += v;
    q += v * v;
  }
};

template <typename T>
__global__ void sums_kernel(const T* x, int64_t n, int64_t c, int64_t l, double* out) {
  channel_sums(n, c, l, out, SumsVisit<T>{x});
}

template <typename T>
__global__ void sums_backward_kernel(const double* g, const T* x, int64_t total, int64_t c,
                                     int64_t l, T* gx) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = (e / l) % c;
    gx[e] = static_cast<T>(g[k] + 2 * g[c + k] * static_cast<double>(x[e]));
  }
}

__device__ inline float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ inline double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ inline float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ inline double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}

template <typename T>
__global__ void affine_kernel(const T* x, const T* f, int64_t total, int64_t c, int64_t l, T* y) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = (e / l) % c;
    y[e] = add_rn(mul_rn(x[e], f[k]), f[c + k]);
  }
}

// gx = g * scale on channel k's elements, and the float64 sums of g * x and of g.
template <typename T>
struct AffineBackwardVisit {
  const T *g, *x, *f;
  T* gx;
  __device__ void operator()(int64_t at, int64_t k, double& a, double& b) const {
    const double v = static_cast<double>(g[at]);
    a += v * static_cast<double>(x[at]);
    b += v;
    gx[at] = mul_rn(g[at], f[k]);
  }
};

template <typename T>
__global__ void affine_backward_kernel(const T* g, const T* x, const T* f, int64_t n, int64_t c,
                                       int64_t l, T* gx, double* sums) {
  channel_sums(n, c, l, sums, AffineBackwardVisit<T>{g, x, f, gx});
}

int blocks_for(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

}  // namespace

void batch_norm_sums_cuda(const Tensor& x, int64_t n, int64_t c, int64_t l, const Tensor& out) {
  if (c == 0) return;
  cudaStream_t stream = cuda::current_stream();
  const int grid = static_cast<int>(c < 65535 ? c : 65535);
  auto* o = static_cast<double*>(out.data_ptr());
  if (x.dtype() == kFloat64) {
    sums_kernel<double>
        <<<grid, kThreads, 0, stream>>>(static_cast<const double*>(x.data_ptr()), n, c, l, o);
  } else {
    sums_kernel<float>
        <<<grid, kThreads, 0, stream>>>(static_cast<const float*>(x.data_ptr()), n, c, l, o);
  }
}

void batch_norm_sums_backward_cuda(const Tensor& g, const Tensor& x, int64_t n, int64_t c,
                                   int64_t l, const Tensor& gx) {
  const int64_t total = n * c * l;
  if (total == 0) return;
  cudaStream_t stream = cuda::current_stream();
  const auto* gp = static_cast<const double*>(g.data_ptr());
  if (x.dtype() == kFloat64) {
    sums_backward_kernel<double><<<blocks_for(total), kThreads, 0, stream>>>(
        gp, static_cast<const double*>(x.data_ptr()), total, c, l,
        static_cast<double*>(gx.data_ptr()));
  } else {
    sums_backward_kernel<float><<<blocks_for(total), kThreads, 0, stream>>>(
        gp, static_cast<const float*>(x.data_ptr()), total, c, l,
        static_cast<float*>(gx.data_ptr()));
  }
}

void batch_norm_affine_cuda(const Tensor& x, const Tensor& f, int64_t n, int64_t c, int64_t l,
                            const Tensor& y) {
  const int64_t total = n * c * l;
  if (total == 0) return;
  cudaStream_t stream = cuda::current_stream();
  if (x.dtype() == kFloat64) {
    affine_kernel<double><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<const double*>(x.data_ptr()), static_cast<const double*>(f.data_ptr()), total,
        c, l, static_cast<double*>(y.data_ptr()));
  } else {
    affine_kernel<float><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<const float*>(x.data_ptr()), static_cast<const float*>(f.data_ptr()), total, c,
        l, static_cast<float*>(y.data_ptr()));
  }
}

void batch_norm_affine_backward_cuda(const Tensor& g, const Tensor& x, const Tensor& f, int64_t n,
                                     int64_t c, int64_t l, const Tensor& gx, const Tensor& sums) {
  if (c == 0) return;
  cudaStream_t stream = cuda::current_stream();
  const int grid = static_cast<int>(c < 65535 ? c : 65535);
  auto* o = static_cast<double*>(sums.data_ptr());
  if (x.dtype() == kFloat64) {
    affine_backward_kernel<double><<<grid, kThreads, 0, stream>>>(
        static_cast<const double*>(g.data_ptr()), static_cast<const double*>(x.data_ptr()),
        static_cast<const double*>(f.data_ptr()), n, c, l, static_cast<double*>(gx.data_ptr()), o);
  } else {
    affine_backward_kernel<float><<<grid, kThreads, 0, stream>>>(
        static_cast<const float*>(g.data_ptr()), static_cast<const float*>(x.data_ptr()),
        static_cast<const float*>(f.data_ptr()), n, c, l, static_cast<float*>(gx.data_ptr()), o);
  }
}

}  // namespace dtensor::detail
