// CUDA kernels of the pool family's window computation (detail/windows.h), the CPU kernels'
// arithmetic (taps in table order, double accumulation): one thread per output element for the
// window sums and maxima; for the max pool backward one thread per plane adds its outputs'
// gradients in a float64 scratch plane in output order (deterministic, no atomics), then rounds.
// Simple rather than fast.
#include <cstdint>
#include <limits>

#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

constexpr int kBlock = 256;

struct Geom {
  int64_t planes, n_in, n_out;
};

// Calls f(k, row, o) for every output element k = p * n_out + o of the planes (row: x's plane
// p), grid-stride.
template <typename T, typename F>
__device__ void for_each_output(const T* x, Geom g, const F& f) {
  const int64_t total = g.planes * g.n_out, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += step) {
    f(k, x + (k / g.n_out) * g.n_in, k % g.n_out);
  }
}

template <typename T>
__global__ void sum_kernel(const T* x, T* out, const int64_t* off, const int64_t* idx,
                           const double* w, Geom g, bool fill, double value) {
  using C = compute_t<T>;
  for_each_output(x, g, [&](int64_t k, const T* row, int64_t o) {
    if (off[o] == off[o + 1] && fill) {
      out[k] = convert<T>(value);
      return;
    }
    double acc = 0;
    for (int64_t q = off[o]; q < off[o + 1]; ++q) {
      acc += w[q] * static_cast<double>(static_cast<C>(row[idx[q]]));
    }
    out[k] = convert<T>(acc);
  });
}

template <typename T>
__global__ void max_kernel(const T* x, T* values, int64_t* indices, const int64_t* off,
                           const int64_t* idx, Geom g) {
  using C = compute_t<T>;
  for_each_output(x, g, [&](int64_t k, const T* row, int64_t o) {
    C best = -std::numeric_limits<C>::infinity();
    int64_t at = off[o] < off[o + 1] ? idx[off[o]] : -1;
    for (int64_t q = off[o]; q < off[o + 1]; ++q) {
      const C v = static_cast<C>(row[idx[q]]);
      if (v > best || v != v) {
        best = v;
        at = idx[q];
      }
    }
    values[k] = at >= 0 ? row[at] : convert<T>(static_cast<double>(best));
    indices[k] = at;
  });
}

template <typename T>
__global__ void index_add_kernel(const T* g, const int64_t* ind, T* out, double* acc, Geom geom) {
  using C = compute_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < geom.planes;
       p += step) {
    double* a = acc + p * geom.n_in;
    for (int64_t i = 0; i < geom.n_in; ++i) a[i] = 0;
    for (int64_t o = 0; o < geom.n_out; ++o) {
      const int64_t i = ind[p * geom.n_out + o];
      if (i >= 0 && i < geom.n_in)
        a[i] += static_cast<double>(static_cast<C>(g[p * geom.n_out + o]));
    }
    for (int64_t i = 0; i < geom.n_in; ++i) out[p * geom.n_in + i] = convert<T>(a[i]);
  }
}

}  // namespace

void window_sum_planes_cuda(const Tensor& x, const TapTensors& t, const Tensor& out) {
  const Geom g{out.size(0), x.size(1), out.size(1)};
  if (g.planes * g.n_out == 0) return;
  cuda::DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "window", [&]<typename T>() {
    sum_kernel<T>
        <<<cuda::grid_for(g.planes * g.n_out, kBlock), kBlock, 0, cuda::current_stream()>>>(
            x.data<T>(), out.data<T>(), t.offsets.data<int64_t>(), t.index.data<int64_t>(),
            t.weight.data<double>(), g, t.fill, t.value);
  });
}

void window_max_planes_cuda(const Tensor& x, const TapTensors& t, const Tensor& values,
                            const Tensor& indices) {
  const Geom g{values.size(0), x.size(1), values.size(1)};
  if (g.planes * g.n_out == 0) return;
  cuda::DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "max_pool", [&]<typename T>() {
    max_kernel<T>
        <<<cuda::grid_for(g.planes * g.n_out, kBlock), kBlock, 0, cuda::current_stream()>>>(
            x.data<T>(), values.data<T>(), indices.data<int64_t>(), t.offsets.data<int64_t>(),
            t.index.data<int64_t>(), g);
  });
}

void index_add_planes_cuda(const Tensor& grad, const Tensor& indices, const Tensor& out) {
  const Geom g{grad.size(0), out.size(1), grad.size(1)};
  if (g.planes * g.n_out == 0) return;
  cuda::DeviceGuard guard(grad.device().index);
  Tensor acc = empty({g.planes, g.n_in}, TensorOptions(kFloat64, grad.device()));
  dispatch_floating(grad.dtype(), "max_pool_backward", [&]<typename T>() {
    index_add_kernel<T><<<cuda::grid_for(g.planes, kBlock), kBlock, 0, cuda::current_stream()>>>(
        grad.data<T>(), indices.data<int64_t>(), out.data<T>(), acc.data<double>(), g);
  });
}

}  // namespace dtensor::detail
