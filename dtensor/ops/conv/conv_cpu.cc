// CPU convolution kernels (conv_kernels.h): im2col + one OpenBLAS GEMM per sample and group.
//
// im2col lays one sample's im [Ci, D, H, W] out as cols [Ci * K, L] (K = kernel elements, L =
// col positions; row (c, kd, kh, kw) holds the input element each col position reads through that
// kernel tap, 0 in the padding), so that the convolution of group g is the GEMM
// w_g [Co_g, Ci_g K] @ cols_g [Ci_g K, L]; col2im adds such a matrix back onto im (the transposed
// convolution). A 1x1 kernel with stride 1 and no padding has cols = im: no copy. Samples run one
// after the other; the GEMMs use OpenBLAS's threads. Chosen over a direct loop of our own by
// measurement (issue 44): conv2d forward, N = 8, C = 64 -> 64, 56x56, 3x3, padding 1, float32,
// one thread: im2col + GEMM 18 ms, a direct loop (inner loop over contiguous output columns,
// vectorised) 158 ms. float32 convolutions other than the 1x1 one run on oneDNN's JIT direct
// convolution first where it loads (conv_onednn.h: 0.75-1.0x PyTorch's time where im2col took
// 1.1-1.3x); this path serves float64, the 1x1 case, DTENSOR_CONV=im2col, and geometries or
// machines oneDNN does not serve.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "dtensor/ops/conv/detail/conv_kernels.h"
#include "dtensor/ops/conv/detail/conv_onednn.h"
#include "dtensor/ops/matmul/detail/openblas.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {
namespace {

// Row-major C[M, N] = A[M, K] (transposed when ta) @ B[K, N] (transposed when tb) + beta C.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == T(0)) {
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    }
    return;
  }
  for (int64_t v : {m, n, k, lda, ldb, ldc}) {
    DT_CHECK(v <= INT_MAX, "[convolution] a GEMM dimension of %d exceeds the BLAS int range", v);
  }
  const auto& blas = openblas();
  const auto opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  if constexpr (std::is_same_v<T, float>) {
    blas.sgemm(CblasRowMajor, opa, opb, i(m), i(n), i(k), 1.0f, a, i(lda), b, i(ldb), beta, c,
               i(ldc));
  } else {
    blas.dgemm(CblasRowMajor, opa, opb, i(m), i(n), i(k), 1.0, a, i(lda), b, i(ldb), beta, c,
               i(ldc));
  }
}

// Whether cols equals im (1x1 kernel, stride 1, no padding: every tap reads its own position).
bool cols_are_im(const ConvGeometry& g) {
  for (int i = 0; i < 3; ++i) {
    if (g.k[i] != 1 || g.stride[i] != 1 || g.pad[i] != 0 || g.im[i] != g.col[i]) return false;
  }
  return true;
}

// The col positions [lo, hi) along one dim whose input index o * s - p + kk * d lies in [0, n).
void valid_range(int64_t out, int64_t n, int64_t s, int64_t p, int64_t off, int64_t& lo,
                 int64_t& hi) {
  // o * s + off - p >= 0  <=>  o >= ceil((p - off) / s)
  const int64_t a = p - off;
  lo = a <= 0 ? 0 : (a + s - 1) / s;
  // o * s + off - p < n  <=>  o < ceil((n + p - off) / s)
  const int64_t b = n + p - off;
  hi = b <= 0 ? 0 : (b + s - 1) / s;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
}

// Visits every (cols row, col position, im element) pair of one sample: f(dst_row_ptr_offset...)
// is called per (row, od, oh) with the run of ow in [lo, hi) reading im at iw0 + ow * sw, and
// zero(offset, count) for the positions that read padding. Shared by im2col and col2im.
template <typename Run, typename Zero>
void for_each_tap(const ConvGeometry& g, int64_t channels, const Run& run, const Zero& zero) {
  const int64_t kd = g.k[0], kh = g.k[1], kw = g.k[2];
  const int64_t od = g.col[0], oh = g.col[1], ow = g.col[2];
  const int64_t L = g.col_size();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t a = 0; a < kd; ++a) {
      for (int64_t b = 0; b < kh; ++b) {
        for (int64_t e = 0; e < kw; ++e) {
          const int64_t row = ((c * kd + a) * kh + b) * kw + e;
          int64_t wlo, whi;
          valid_range(ow, g.im[2], g.stride[2], g.pad[2], e * g.dil[2], wlo, whi);
          for (int64_t z = 0; z < od; ++z) {
            const int64_t iz = z * g.stride[0] - g.pad[0] + a * g.dil[0];
            const int64_t base = row * L + z * oh * ow;
            if (iz < 0 || iz >= g.im[0]) {
              zero(base, oh * ow);
              continue;
            }
            for (int64_t y = 0; y < oh; ++y) {
              const int64_t iy = y * g.stride[1] - g.pad[1] + b * g.dil[1];
              const int64_t at = base + y * ow;
              if (iy < 0 || iy >= g.im[1]) {
                zero(at, ow);
                continue;
              }
              zero(at, wlo);
              zero(at + whi, ow - whi);
              const int64_t src = ((c * g.im[0] + iz) * g.im[1] + iy) * g.im[2] - g.pad[2] +
                                  e * g.dil[2];  // im offset of ow = 0
              run(at + wlo, src + wlo * g.stride[2], whi - wlo);
            }
          }
        }
      }
    }
  }
}

template <typename T>
void im2col(const ConvGeometry& g, const T* im, T* cols) {
  const int64_t s = g.stride[2];
  for_each_tap(
      g, g.ci,
      [&](int64_t dst, int64_t src, int64_t n) {
        if (s == 1) {
          std::memcpy(cols + dst, im + src, static_cast<size_t>(n) * sizeof(T));
        } else {
          for (int64_t i = 0; i < n; ++i) cols[dst + i] = im[src + i * s];
        }
      },
      [&](int64_t at, int64_t n) { std::fill(cols + at, cols + at + n, T(0)); });
}

// im (zeroed by the caller) += the transposed gather of cols.
template <typename T>
void col2im(const ConvGeometry& g, const T* cols, T* im) {
  const int64_t s = g.stride[2];
  for_each_tap(
      g, g.ci,
      [&](int64_t src, int64_t dst, int64_t n) {
        T* __restrict__ out = im + dst;
        const T* __restrict__ in = cols + src;
        if (s == 1) {  // contiguous: vectorised
          for (int64_t i = 0; i < n; ++i) out[i] += in[i];
        } else {
          for (int64_t i = 0; i < n; ++i) out[i * s] += in[i];
        }
      },
      [](int64_t, int64_t) {});
}

// Adds bias[c] to every element of channel c of x [N, C, S].
template <typename T>
void add_bias(T* x, const T* bias, int64_t n, int64_t c, int64_t s) {
  if (bias == nullptr) return;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      T* p = x + (i * c + j) * s;
      const T b = bias[j];
      for (int64_t q = 0; q < s; ++q) p[q] += b;
    }
  }
}

template <typename T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

template <typename F>
void dispatch_compute(const Tensor& t, const F& f) {
  if (t.dtype() == kFloat64) {
    f.template operator()<double>();
  } else {
    DT_CHECK(t.dtype() == kFloat32, "[convolution] kernel expects float32 or float64, got %s",
             dtype_name(t.dtype()));
    f.template operator()<float>();
  }
}

// One sample's cols matrix [Ci K, L] and the sizes the GEMMs use: cols of a sample are its im
// itself when the kernel is 1x1 with stride 1 and no padding (direct), else im2col into buf.
template <typename T>
struct Cols {
  explicit Cols(const ConvGeometry& g)
      : geo(g),
        L(g.col_size()),
        I(g.im_size()),
        cigk(g.ci / g.groups * g.k_size()),
        cog(g.co / g.groups),
        direct(cols_are_im(g)),
        buf(direct ? 0 : static_cast<size_t>(g.ci * g.k_size() * L)) {}
  // The cols of the sample whose im starts at x.
  const T* of(const T* x) {
    if (direct) return x;
    im2col(geo, x, buf.data());
    return buf.data();
  }
  const ConvGeometry& geo;
  const int64_t L, I, cigk, cog;  // col positions, im positions, Ci_g K, Co_g
  const bool direct;
  std::vector<T> buf;
};

}  // namespace

void conv_forward_cpu(const ConvGeometry& g, const Tensor& im, const Tensor& w, const Tensor& bias,
                      const Tensor& col) {
  if (im.dtype() == kFloat32 && conv_use_onednn(g) &&
      conv_forward_onednn(g, ptr<float>(im), ptr<float>(w), ptr<float>(bias),
                          static_cast<float*>(col.data_ptr()))) {
    return;
  }
  dispatch_compute(im, [&]<typename T>() {
    Cols<T> c(g);
    const T* x = ptr<T>(im);
    const T* wp = ptr<T>(w);
    T* y = static_cast<T*>(col.data_ptr());
    for (int64_t n = 0; n < g.n; ++n) {
      const T* cols = c.of(x + n * g.ci * c.I);
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        gemm<T>(false, false, c.cog, c.L, c.cigk, wp + gr * c.cog * c.cigk, c.cigk,
                cols + gr * c.cigk * c.L, c.L, T(0), y + (n * g.co + gr * c.cog) * c.L, c.L);
      }
    }
    add_bias(y, ptr<T>(bias), g.n, g.co, c.L);
  });
}

void conv_data_cpu(const ConvGeometry& g, const Tensor& col, const Tensor& w, const Tensor& bias,
                   const Tensor& im) {
  if (col.dtype() == kFloat32 && conv_use_onednn(g) &&
      conv_data_onednn(g, ptr<float>(col), ptr<float>(w), static_cast<float*>(im.data_ptr()))) {
    add_bias(static_cast<float*>(im.data_ptr()), ptr<float>(bias), g.n, g.ci, g.im_size());
    return;
  }
  dispatch_compute(col, [&]<typename T>() {
    Cols<T> c(g);
    const T* y = ptr<T>(col);
    const T* wp = ptr<T>(w);
    T* x = static_cast<T*>(im.data_ptr());
    for (int64_t n = 0; n < g.n; ++n) {
      T* xn = x + n * g.ci * c.I;
      T* cols = c.direct ? xn : c.buf.data();
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        gemm<T>(true, false, c.cigk, c.L, c.cog, wp + gr * c.cog * c.cigk, c.cigk,
                y + (n * g.co + gr * c.cog) * c.L, c.L, T(0), cols + gr * c.cigk * c.L, c.L);
      }
      if (!c.direct) {
        std::fill(xn, xn + g.ci * c.I, T(0));
        col2im(g, c.buf.data(), xn);
      }
    }
    add_bias(x, ptr<T>(bias), g.n, g.ci, c.I);
  });
}

void conv_weight_cpu(const ConvGeometry& g, const Tensor& im, const Tensor& col, const Tensor& gw) {
  if (im.dtype() == kFloat32 && conv_use_onednn(g) &&
      conv_weight_onednn(g, ptr<float>(im), ptr<float>(col), static_cast<float*>(gw.data_ptr()))) {
    return;
  }
  dispatch_compute(im, [&]<typename T>() {
    Cols<T> c(g);
    const T* x = ptr<T>(im);
    const T* y = ptr<T>(col);
    T* dw = static_cast<T*>(gw.data_ptr());
    for (int64_t n = 0; n < g.n; ++n) {
      const T* cols = c.of(x + n * g.ci * c.I);
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        // The first sample overwrites (beta 0), the others add.
        gemm<T>(false, true, c.cog, c.cigk, c.L, y + (n * g.co + gr * c.cog) * c.L, c.L,
                cols + gr * c.cigk * c.L, c.L, n == 0 ? T(0) : T(1), dw + gr * c.cog * c.cigk,
                c.cigk);
      }
    }
    if (g.n == 0) std::fill(dw, dw + g.co * c.cigk, T(0));
  });
}

}  // namespace dtensor::detail
