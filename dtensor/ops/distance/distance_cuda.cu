// CUDA kernels of the distance family: one thread per output element running the per-pair math
// of detail/distance_kernels.h (the CPU's own code). Simple rather than fast.
#include "dtensor/ops/distance/detail/distance_kernels.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

constexpr int kBlock = 128;

template <typename T>
__global__ void cdist_kernel(T* out, const T* a, const T* b, CdistGeom g, double p) {
  const int64_t total = g.b * g.p * g.r;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t j = e % g.r, i = (e / g.r) % g.p, n = e / (g.r * g.p);
    out[e] = convert<T>(cdist_pair(a + (n * g.p + i) * g.m, b + (n * g.r + j) * g.m, g.m, p));
  }
}

template <typename T>
__global__ void cdist_backward_kernel(T* out, const T* gr, const T* a, const T* b, const T* d,
                                      CdistGeom g, double p) {
  const int64_t total = g.b * g.p * g.m;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t k = e % g.m, i = (e / g.m) % g.p, n = e / (g.m * g.p);
    const int64_t pr = (n * g.p + i) * g.r;
    double acc = 0.0;
    for (int64_t j = 0; j < g.r; ++j) {
      const double gij = convert<double>(gr[pr + j]);
      if (gij == 0.0) continue;
      const double diff = cdist_grad_diff(a[e], b[(n * g.r + j) * g.m + k], p);
      acc += gij * cdist_grad_term(diff, convert<double>(d[pr + j]), p);
    }
    out[e] = convert<T>(acc);
  }
}

}  // namespace

void cdist_cuda(const Tensor& out, const Tensor& x1, const Tensor& x2, CdistGeom g, double p) {
  const int64_t total = g.b * g.p * g.r;
  if (total == 0) return;
  cuda::DeviceGuard guard(x1.device().index);
  dispatch_floating(x1.dtype(), "cdist", [&]<typename T>() {
    cdist_kernel<T><<<cuda::grid_for(total, kBlock), kBlock, 0, cuda::current_stream()>>>(
        out.data<T>(), x1.data<T>(), x2.data<T>(), g, p);
  });
}

void cdist_backward_cuda(const Tensor& out, const Tensor& grad, const Tensor& x1, const Tensor& x2,
                         const Tensor& dist, CdistGeom g, double p) {
  const int64_t total = g.b * g.p * g.m;
  if (total == 0) return;
  cuda::DeviceGuard guard(x1.device().index);
  dispatch_floating(x1.dtype(), "cdist_backward", [&]<typename T>() {
    cdist_backward_kernel<T><<<cuda::grid_for(total, kBlock), kBlock, 0, cuda::current_stream()>>>(
        out.data<T>(), grad.data<T>(), x1.data<T>(), x2.data<T>(), dist.data<T>(), g, p);
  });
}

}  // namespace dtensor::detail
