// Direct CPU kernels of max pools and linear interpolation (detail/windows.h): the tap kernels
// (pool_cpu.cc) load an index (and a weight) per tap from the product table, which made these
// two ops slower than PyTorch's (issue 44); here the windows come from the args and the per-dim
// taps, and every result equals the tap kernel's bit for bit (same scan order, same double
// products, same summation order). Spatial dims are padded to three with unit dims (one tap of
// weight 1 at 0), which changes no index, no product (1.0 * w == w) and no order.
//
// The max pool runs the output columns whose windows lie inside the input (all but a few at the
// edges) as Highway vectors, one output per lane (compiled per target of
// dtensor/ops/common/detail/simd_config.h, chosen at run time): per tap, in window order, a lane
// takes the tap where it is larger or NaN, a branch-free select. The scalar scan's branch on
// random data mispredicts, which was most of its time. Stride 1 loads contiguous taps, stride 2
// deinterleaves (LoadInterleaved2), larger strides gather.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "dtensor/ops/common/detail/parallel_for.h"
#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/tensor/convert.h"

// The target-independent part, once (the file is re-included per Highway target below).
#ifndef DTENSOR_OPS_POOL_POOL_DIRECT_CPU_SHARED_
#define DTENSOR_OPS_POOL_POOL_DIRECT_CPU_SHARED_
namespace dtensor::detail {
namespace {

constexpr int kDims = 3;

// One spatial dim of a max pool: output o reads the in-range inputs first[o] + q * dilation,
// q < count[o], in window order (pool_dim's taps in pool.cc, computed from the args).
struct MaxDim {
  std::vector<int64_t> first, count;
  int64_t dilation = 1, in = 1, out = 1;
};

MaxDim max_dim(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d) {
  MaxDim m;
  m.dilation = d;
  m.in = in;
  m.out = out;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - p;
    const int64_t q0 = start < 0 ? (-start + d - 1) / d : 0;
    const int64_t q1 = start < in ? std::min(k, (in - start + d - 1) / d) : 0;
    m.first.push_back(start + q0 * d);
    m.count.push_back(std::max<int64_t>(0, q1 - q0));
  }
  return m;
}

// A max pool's geometry: the three dims, and the last dim's kernel, stride and padding with the
// output columns [full_lo, full_hi) whose windows lie wholly inside the input.
struct MaxGeom {
  MaxDim m[kDims];
  int64_t kw = 1, sw = 1, pw = 0, full_lo = 0, full_hi = 0;
};

// One output of row (plane, zd, zh), column x, as window_max_planes computes it: the first
// largest in window order, a NaN always taking over; no tap gives -inf at index -1.
template <typename T>
inline void max_one(const T* plane, const MaxGeom& g, int64_t zd, int64_t zh, int64_t x, T* v_out,
                    int64_t* i_out) {
  const int64_t H = g.m[1].in, W = g.m[2].in;
  const int64_t fd = g.m[0].first[zd], cd = g.m[0].count[zd];
  const int64_t fh = g.m[1].first[zh], ch = g.m[1].count[zh];
  const int64_t fw = g.m[2].first[x], cw = g.m[2].count[x];
  const int64_t dd = g.m[0].dilation, dh = g.m[1].dilation, dw = g.m[2].dilation;
  T best = -std::numeric_limits<T>::infinity();
  int64_t at = cd > 0 && ch > 0 && cw > 0 ? (fd * H + fh) * W + fw : -1;
  for (int64_t qd = 0; qd < cd; ++qd) {
    for (int64_t qh = 0; qh < ch; ++qh) {
      const int64_t base = ((fd + qd * dd) * H + fh + qh * dh) * W;
      const T* row = plane + base;
      for (int64_t qw = 0, iw = fw; qw < cw; ++qw, iw += dw) {
        const T v = row[iw];
        if (v > best || std::isnan(v)) {
          best = v;
          at = base + iw;
        }
      }
    }
  }
  v_out[x] = at >= 0 ? plane[at] : best;
  i_out[x] = at;
}

}  // namespace
}  // namespace dtensor::detail
#endif  // DTENSOR_OPS_POOL_POOL_DIRECT_CPU_SHARED_

#define HWY_TARGET_INCLUDE "dtensor/ops/pool/pool_direct_cpu.cc"
#include "dtensor/ops/common/detail/simd_kernel-inl.h"  // IWYU pragma: keep

HWY_BEFORE_NAMESPACE();
namespace dtensor::detail::HWY_NAMESPACE {
namespace {

// Outputs x .. x + Lanes(d) of a row (their windows inside the input), one per lane: the scalar
// scan's taps in the same order, each taken where larger or NaN. The index lanes are T-sized
// ints (int32 for float32: the plane's size was checked to fit).
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void max_lanes(D d, const T* HWY_RESTRICT plane, const MaxGeom& g, int64_t zd,
                          int64_t zh, int64_t x, T* HWY_RESTRICT v_out,
                          int64_t* HWY_RESTRICT i_out) {
  const hn::RebindToSigned<D> di;
  using TI = hn::TFromD<decltype(di)>;
  const int64_t H = g.m[1].in, W = g.m[2].in;
  const int64_t fd = g.m[0].first[zd], cd = g.m[0].count[zd];
  const int64_t fh = g.m[1].first[zh], ch = g.m[1].count[zh];
  const int64_t dd = g.m[0].dilation, dh = g.m[1].dilation, dw = g.m[2].dilation;
  const int64_t start = x * g.sw - g.pw;  // the first lane's window start (in the input)
  const auto lane = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<TI>(g.sw)));
  auto best = hn::Set(d, -std::numeric_limits<T>::infinity());
  auto at = hn::Add(hn::Set(di, static_cast<TI>((fd * H + fh) * W + start)), lane);
  for (int64_t qd = 0; qd < cd; ++qd) {
    for (int64_t qh = 0; qh < ch; ++qh) {
      const int64_t base = ((fd + qd * dd) * H + fh + qh * dh) * W;
      for (int64_t qw = 0; qw < g.kw; ++qw) {
        const int64_t iw = start + qw * dw;
        const T* p = plane + base + iw;
        hn::Vec<D> v;
        if (g.sw == 1) {
          v = hn::LoadU(d, p);
        } else if (g.sw == 2) {
          hn::Vec<D> odd;
          hn::LoadInterleaved2(d, p, v, odd);
        } else {
          v = hn::GatherIndex(d, p, lane);
        }
        const auto take = hn::Or(hn::Gt(v, best), hn::IsNaN(v));
        best = hn::IfThenElse(take, v, best);
        at = hn::IfThenElse(hn::RebindMask(di, take),
                            hn::Add(hn::Set(di, static_cast<TI>(base + iw)), lane), at);
      }
    }
  }
  hn::StoreU(best, d, v_out + x);
  if constexpr (sizeof(TI) == sizeof(int64_t)) {
    hn::StoreU(at, di, reinterpret_cast<TI*>(i_out + x));
  } else {
    HWY_ALIGN TI buf[hn::MaxLanes(di)];
    hn::Store(at, di, buf);
    for (size_t i = 0; i < hn::Lanes(di); ++i) i_out[x + static_cast<int64_t>(i)] = buf[i];
  }
}

// Whether lanes x .. x + n of a row may run as a vector: their windows inside the input, and for
// stride 2 the deinterleaving load's one element past the last lane's tap inside the buffer.
HWY_INLINE bool lanes_fit(const MaxGeom& g, int64_t x, int64_t n, int64_t row_end, int64_t end) {
  if (x < g.full_lo || x + n > g.full_hi) return false;
  return g.sw != 2 || row_end + (x + n - 1) * 2 - g.pw + (g.kw - 1) * g.m[2].dilation + 1 < end;
}

template <typename T>
void max_rows(const T* HWY_RESTRICT src, T* HWY_RESTRICT vals, int64_t* HWY_RESTRICT ind, int64_t b,
              int64_t e, int64_t planes, const MaxGeom& g) {
  const hn::ScalableTag<T> d;
  const hn::Half<decltype(d)> dh;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d)), nh = static_cast<int64_t>(hn::Lanes(dh));
  const int64_t H = g.m[1].in, W = g.m[2].in, n_in = g.m[0].in * H * W;
  const int64_t oh = g.m[1].out, ow = g.m[2].out, rows_per_plane = g.m[0].out * oh;
  // The int32 index lanes of float32 hold a plane's positions.
  const bool vec = sizeof(T) == 8 || n_in <= std::numeric_limits<int32_t>::max();
  for (int64_t r = b; r < e; ++r) {
    const T* plane = src + (r / rows_per_plane) * n_in;
    const int64_t zd = (r % rows_per_plane) / oh, zh = r % oh;
    T* v_out = vals + r * ow;
    int64_t* i_out = ind + r * ow;
    const bool rows_in = vec && g.m[0].count[zd] > 0 && g.m[1].count[zh] > 0;
    // Offsets from the plane's start: the first tap row's start, the buffer's end.
    const int64_t row0 = ((g.m[0].first[zd]) * H + g.m[1].first[zh]) * W;
    const int64_t buf_end = (planes - r / rows_per_plane) * n_in;
    const int64_t last_row = row0 + ((g.m[0].count[zd] - 1) * g.m[0].dilation * H +
                                     (g.m[1].count[zh] - 1) * g.m[1].dilation) *
                                        W;
    int64_t x = 0;
    while (x < ow) {
      if (rows_in && lanes_fit(g, x, n, last_row, buf_end)) {
        max_lanes(d, plane, g, zd, zh, x, v_out, i_out);
        x += n;
      } else if (rows_in && nh < n && lanes_fit(g, x, nh, last_row, buf_end)) {
        max_lanes(dh, plane, g, zd, zh, x, v_out, i_out);
        x += nh;
      } else {
        max_one(plane, g, zd, zh, x, v_out, i_out);
        ++x;
      }
    }
  }
}

}  // namespace

void MaxPoolRowsF(DType dt, const void* src, void* vals, int64_t* ind, int64_t b, int64_t e,
                  int64_t planes, const MaxGeom& g) {
  if (dt == kFloat64) {
    max_rows(static_cast<const double*>(src), static_cast<double*>(vals), ind, b, e, planes, g);
  } else {
    max_rows(static_cast<const float*>(src), static_cast<float*>(vals), ind, b, e, planes, g);
  }
}

}  // namespace dtensor::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dtensor::detail {

HWY_EXPORT(MaxPoolRowsF);

namespace {

// Rows of the output (plane, od, oh): the outer dims' taps give up to four input rows with
// weights wd * wh (the table's 1.0 * wd * wh), each output column its two taps (linear_dim's
// i0, 1 - l1 and i1, l1; a column with one tap has a second of weight 0, skipped as the table
// has no such tap); the sum runs row by row, column tap inside, as the table's row-major
// product.
template <typename T>
void linear_rows(const T* src, T* dst, int64_t rows, const DimTaps (&t)[kDims],
                 const int64_t (&in)[kDims]) {
  const int64_t oh = t[1].out(), ow = t[2].out(), rows_per_plane = t[0].out() * oh;
  const int64_t n_in = in[0] * in[1] * in[2];
  std::vector<int64_t> col_index(2 * static_cast<size_t>(ow));
  std::vector<double> col_weight(2 * static_cast<size_t>(ow), 0.0);
  for (int64_t x = 0; x < ow; ++x) {
    const int64_t q = t[2].offsets[x], n = t[2].offsets[x + 1] - q;
    for (int64_t k = 0; k < 2; ++k) {
      col_index[2 * x + k] = t[2].index[q + std::min<int64_t>(k, n - 1)];
      if (k < n) col_weight[2 * x + k] = t[2].weight[q + k];
    }
  }
  const int64_t* ci = col_index.data();
  const double* cw = col_weight.data();
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, 4 * ow)),
               [&](int64_t b, int64_t e) {
                 const T* row[4];
                 double wr[4];
                 for (int64_t r = b; r < e; ++r) {
                   const T* plane = src + (r / rows_per_plane) * n_in;
                   const int64_t zd = (r % rows_per_plane) / oh, zh = r % oh;
                   int n = 0;
                   for (int64_t a = t[0].offsets[zd]; a < t[0].offsets[zd + 1]; ++a) {
                     for (int64_t c = t[1].offsets[zh]; c < t[1].offsets[zh + 1]; ++c) {
                       row[n] = plane + (t[0].index[a] * in[1] + t[1].index[c]) * in[2];
                       wr[n++] = (1.0 * t[0].weight[a]) * t[1].weight[c];
                     }
                   }
                   T* out = dst + r * ow;
                   for (int64_t x = 0; x < ow; ++x) {
                     const int64_t c0 = ci[2 * x], c1 = ci[2 * x + 1];
                     const double w0 = cw[2 * x], w1 = cw[2 * x + 1];
                     double acc = 0;
                     for (int j = 0; j < n; ++j) {
                       acc += (wr[j] * w0) * static_cast<double>(row[j][c0]);
                       if (w1 != 0.0) acc += (wr[j] * w1) * static_cast<double>(row[j][c1]);
                     }
                     out[x] = convert<T>(acc);
                   }
                 }
               });
}

bool direct_dtype(const Tensor& x) {
  return !x.device().is_cuda() && (x.dtype() == kFloat32 || x.dtype() == kFloat64);
}

}  // namespace

bool max_pool_direct(const Tensor& x, const WindowArgs& a, IntSpan in_spatial, IntSpan out_spatial,
                     const Tensor& values, const Tensor& indices) {
  if (!direct_dtype(x) || a.kind != WindowKind::kMaxPool) return false;
  MaxGeom g;
  int64_t taps = 1;
  for (int64_t j = 0; j < a.nd; ++j) {
    const int64_t k = kDims - a.nd + j;
    g.m[k] = max_dim(in_spatial[j], out_spatial[j], a.kernel[j], a.stride[j], a.padding[j],
                     a.dilation[j]);
    taps *= a.kernel[j];
  }
  for (int64_t k = 0; k < kDims - a.nd; ++k) g.m[k] = max_dim(1, 1, 1, 1, 0, 1);
  const int64_t last = a.nd - 1;
  g.kw = a.kernel[last];
  g.sw = a.stride[last];
  g.pw = a.padding[last];
  const MaxDim& w = g.m[kDims - 1];
  g.full_lo = 0;
  while (g.full_lo < w.out && w.count[g.full_lo] != g.kw) ++g.full_lo;
  g.full_hi = g.full_lo;
  while (g.full_hi < w.out && w.count[g.full_hi] == g.kw) ++g.full_hi;
  const int64_t planes = values.size(0), rows = planes * g.m[0].out * g.m[1].out;
  if (rows == 0 || w.out == 0) return true;
  const void* src = x.data_ptr();
  void* vals = values.data_ptr();
  int64_t* ind = indices.data<int64_t>();
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, w.out * taps)),
               [&](int64_t b, int64_t e) {
                 HWY_DYNAMIC_DISPATCH(MaxPoolRowsF)(x.dtype(), src, vals, ind, b, e, planes, g);
               });
  return true;
}

bool linear_direct(const Tensor& x, const std::vector<DimTaps>& dims, IntSpan in_spatial,
                   const Tensor& out) {
  const int64_t nd = static_cast<int64_t>(dims.size());
  if (!direct_dtype(x) || nd < 1 || nd > kDims) return false;
  const DimTaps& last = dims.back();
  for (int64_t o = 0; o < last.out(); ++o) {
    const int64_t n = last.offsets[o + 1] - last.offsets[o];
    if (n < 1 || n > 2) return false;
  }
  DimTaps t[kDims];
  int64_t in[kDims] = {1, 1, 1};
  for (int64_t j = 0; j < nd; ++j) {
    t[kDims - nd + j] = dims[static_cast<size_t>(j)];
    in[kDims - nd + j] = in_spatial[j];
  }
  for (int64_t k = 0; k < kDims - nd; ++k) {
    t[k].add(0, 1.0);
    t[k].close();
  }
  const int64_t rows = out.size(0) * t[0].out() * t[1].out();
  if (rows == 0 || t[2].out() == 0) return true;
  dispatch_floating(x.dtype(), "interpolate", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      linear_rows<T>(x.data<T>(), out.data<T>(), rows, t, in);
    }
  });
  return true;
}

}  // namespace dtensor::detail
#endif  // HWY_ONCE
