// CUDA batch_norm_sums and its backward: one block per channel accumulating the float64 sums
// of x and x^2 over the channel's n * l elements (shared-memory tree reduction), and a
// grid-stride elementwise gradient.
#include "dtensor/ops/norm/detail/batch_norm_kernels.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void sums_kernel(const T* x, int64_t n, int64_t c, int64_t l, double* out) {
  __shared__ double s_sh[kThreads];
  __shared__ double q_sh[kThreads];
  for (int64_t k = blockIdx.x; k < c; k += gridDim.x) {
    double s = 0, q = 0;
    for (int64_t e = threadIdx.x; e < n * l; e += blockDim.x) {
      const int64_t i = e / l, j = e % l;
      const double v = static_cast<double>(x[(i * c + k) * l + j]);
      s += v;
      q += v * v;
    }
    s_sh[threadIdx.x] = s;
    q_sh[threadIdx.x] = q;
    __syncthreads();
    for (int h = kThreads / 2; h > 0; h /= 2) {
      if (threadIdx.x < h) {
        s_sh[threadIdx.x] += s_sh[threadIdx.x + h];
        q_sh[threadIdx.x] += q_sh[threadIdx.x + h];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      out[k] = s_sh[0];
      out[c + k] = q_sh[0];
    }
    __syncthreads();
  }
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

}  // namespace dtensor::detail
