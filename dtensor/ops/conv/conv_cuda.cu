// CUDA convolution kernels (conv_kernels.h): direct loops, one thread per output element
// (grid-stride), accumulating in the tensors' type (float32 or float64; conv.cc converts 16-bit
// floats). Simple and correct rather than fast: an implicit-GEMM or cuDNN path is the next step.
#include <cstdint>

#include "dtensor/ops/conv/detail/conv_kernels.h"
#include "dtensor/tensor/cuda_check.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

// ConvGeometry as plain arrays (device code reads no std::array).
struct Geo {
  int64_t n, groups, ci, co;
  int64_t im[3], col[3], k[3], s[3], p[3], d[3];
};

Geo to_geo(const ConvGeometry& g) {
  Geo r{g.n, g.groups, g.ci, g.co, {}, {}, {}, {}, {}, {}};
  for (int i = 0; i < 3; ++i) {
    r.im[i] = g.im[i];
    r.col[i] = g.col[i];
    r.k[i] = g.k[i];
    r.s[i] = g.stride[i];
    r.p[i] = g.pad[i];
    r.d[i] = g.dil[i];
  }
  return r;
}

__device__ inline int64_t im_size(const Geo& g) {
  return g.im[0] * g.im[1] * g.im[2];
}
__device__ inline int64_t col_size(const Geo& g) {
  return g.col[0] * g.col[1] * g.col[2];
}
__device__ inline int64_t k_size(const Geo& g) {
  return g.k[0] * g.k[1] * g.k[2];
}

// col[n, co, pos] = bias[co] + sum over the group's im channels and the taps.
template <typename T>
__global__ void forward_kernel(Geo g, const T* im, const T* w, const T* bias, T* col) {
  const int64_t L = col_size(g), I = im_size(g), K = k_size(g);
  const int64_t cig = g.ci / g.groups, cog = g.co / g.groups;
  const int64_t total = g.n * g.co * L;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t pos = idx % L, co = (idx / L) % g.co, n = idx / (L * g.co);
    const int64_t ox = pos % g.col[2], oy = (pos / g.col[2]) % g.col[1],
                  oz = pos / (g.col[2] * g.col[1]);
    const int64_t grp = co / cog;
    T acc = bias != nullptr ? bias[co] : T(0);
    for (int64_t c = 0; c < cig; ++c) {
      const T* x = im + (n * g.ci + grp * cig + c) * I;
      const T* wc = w + (co * cig + c) * K;
      for (int64_t a = 0; a < g.k[0]; ++a) {
        const int64_t iz = oz * g.s[0] - g.p[0] + a * g.d[0];
        if (iz < 0 || iz >= g.im[0]) continue;
        for (int64_t b = 0; b < g.k[1]; ++b) {
          const int64_t iy = oy * g.s[1] - g.p[1] + b * g.d[1];
          if (iy < 0 || iy >= g.im[1]) continue;
          for (int64_t e = 0; e < g.k[2]; ++e) {
            const int64_t ix = ox * g.s[2] - g.p[2] + e * g.d[2];
            if (ix < 0 || ix >= g.im[2]) continue;
            acc += wc[(a * g.k[1] + b) * g.k[2] + e] * x[(iz * g.im[1] + iy) * g.im[2] + ix];
          }
        }
      }
    }
    col[idx] = acc;
  }
}

// The col position along one dim that reads im index i through tap t, or -1.
__device__ inline int64_t col_of(int64_t i, int64_t t, int64_t s, int64_t p, int64_t d, int64_t n) {
  const int64_t v = i + p - t * d;
  if (v < 0 || v % s != 0 || v / s >= n) return -1;
  return v / s;
}

// im[n, ci, pos] = bias[ci] + sum over the group's col channels and the taps reading pos.
template <typename T>
__global__ void data_kernel(Geo g, const T* col, const T* w, const T* bias, T* im) {
  const int64_t L = col_size(g), I = im_size(g), K = k_size(g);
  const int64_t cig = g.ci / g.groups, cog = g.co / g.groups;
  const int64_t total = g.n * g.ci * I;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t pos = idx % I, ci = (idx / I) % g.ci, n = idx / (I * g.ci);
    const int64_t ix = pos % g.im[2], iy = (pos / g.im[2]) % g.im[1],
                  iz = pos / (g.im[2] * g.im[1]);
    const int64_t grp = ci / cig, c = ci % cig;
    T acc = bias != nullptr ? bias[ci] : T(0);
    for (int64_t a = 0; a < g.k[0]; ++a) {
      const int64_t oz = col_of(iz, a, g.s[0], g.p[0], g.d[0], g.col[0]);
      if (oz < 0) continue;
      for (int64_t b = 0; b < g.k[1]; ++b) {
        const int64_t oy = col_of(iy, b, g.s[1], g.p[1], g.d[1], g.col[1]);
        if (oy < 0) continue;
        for (int64_t e = 0; e < g.k[2]; ++e) {
          const int64_t ox = col_of(ix, e, g.s[2], g.p[2], g.d[2], g.col[2]);
          if (ox < 0) continue;
          const int64_t tap = (a * g.k[1] + b) * g.k[2] + e,
                        at = (oz * g.col[1] + oy) * g.col[2] + ox;
          for (int64_t q = 0; q < cog; ++q) {
            const int64_t co = grp * cog + q;
            acc += w[(co * cig + c) * K + tap] * col[(n * g.co + co) * L + at];
          }
        }
      }
    }
    im[idx] = acc;
  }
}

// gw[co, c, tap] = sum over the batch and the col positions of col * the im element it reads.
template <typename T>
__global__ void weight_kernel(Geo g, const T* im, const T* col, T* gw) {
  const int64_t L = col_size(g), I = im_size(g), K = k_size(g);
  const int64_t cig = g.ci / g.groups, cog = g.co / g.groups;
  const int64_t total = g.co * cig * K;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t tap = idx % K, c = (idx / K) % cig, co = idx / (K * cig);
    const int64_t e = tap % g.k[2], b = (tap / g.k[2]) % g.k[1], a = tap / (g.k[2] * g.k[1]);
    const int64_t grp = co / cog;
    T acc = T(0);
    for (int64_t n = 0; n < g.n; ++n) {
      const T* x = im + (n * g.ci + grp * cig + c) * I;
      const T* y = col + (n * g.co + co) * L;
      for (int64_t oz = 0; oz < g.col[0]; ++oz) {
        const int64_t iz = oz * g.s[0] - g.p[0] + a * g.d[0];
        if (iz < 0 || iz >= g.im[0]) continue;
        for (int64_t oy = 0; oy < g.col[1]; ++oy) {
          const int64_t iy = oy * g.s[1] - g.p[1] + b * g.d[1];
          if (iy < 0 || iy >= g.im[1]) continue;
          for (int64_t ox = 0; ox < g.col[2]; ++ox) {
            const int64_t ix = ox * g.s[2] - g.p[2] + e * g.d[2];
            if (ix < 0 || ix >= g.im[2]) continue;
            acc += y[(oz * g.col[1] + oy) * g.col[2] + ox] * x[(iz * g.im[1] + iy) * g.im[2] + ix];
          }
        }
      }
    }
    gw[idx] = acc;
  }
}

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

// Launches f<T>(grid, block, stream) for `total` threads' worth of work on t's device.
template <typename F>
void launch(const Tensor& t, int64_t total, const F& f) {
  if (total == 0) return;
  cuda::DeviceGuard guard(t.device().index);
  constexpr int kBlock = 256;
  const int64_t blocks = (total + kBlock - 1) / kBlock;
  const unsigned int grid = static_cast<unsigned int>(blocks < 65535 ? blocks : 65535);
  cudaStream_t stream = cuda::current_stream();
  if (t.dtype() == kFloat64) {
    f.template operator()<double>(grid, kBlock, stream);
  } else {
    DT_CHECK(t.dtype() == kFloat32, "[convolution] kernel expects float32 or float64, got %s",
             dtype_name(t.dtype()));
    f.template operator()<float>(grid, kBlock, stream);
  }
  DT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace

void conv_forward_cuda(const ConvGeometry& g, const Tensor& im, const Tensor& w, const Tensor& bias,
                       const Tensor& col) {
  const Geo geo = to_geo(g);
  launch(im, g.n * g.co * g.col_size(), [&]<typename T>(unsigned grid, int block, cudaStream_t s) {
    forward_kernel<T><<<grid, block, 0, s>>>(geo, cptr<T>(im), cptr<T>(w), cptr<T>(bias),
                                             static_cast<T*>(col.data_ptr()));
  });
}

void conv_data_cuda(const ConvGeometry& g, const Tensor& col, const Tensor& w, const Tensor& bias,
                    const Tensor& im) {
  const Geo geo = to_geo(g);
  launch(col, g.n * g.ci * g.im_size(), [&]<typename T>(unsigned grid, int block, cudaStream_t s) {
    data_kernel<T><<<grid, block, 0, s>>>(geo, cptr<T>(col), cptr<T>(w), cptr<T>(bias),
                                          static_cast<T*>(im.data_ptr()));
  });
}

void conv_weight_cuda(const ConvGeometry& g, const Tensor& im, const Tensor& col,
                      const Tensor& gw) {
  const Geo geo = to_geo(g);
  launch(im, g.co * (g.ci / g.groups) * g.k_size(),
         [&]<typename T>(unsigned grid, int block, cudaStream_t s) {
           weight_kernel<T><<<grid, block, 0, s>>>(geo, cptr<T>(im), cptr<T>(col),
                                                   static_cast<T*>(gw.data_ptr()));
         });
}

}  // namespace dtensor::detail
