// CPU batch_norm_sums and batch_norm_affine with their backwards: per channel, the float64 sums
// of x and x^2 over the batch and spatial elements and their elementwise gradient a + b * x (in
// float64, rounded once to x's dtype); y = x * scale + shift and its gradients (g * scale, and
// the float64 sums of g * x and of g). All run over each contiguous [l] row of a (sample,
// channel) pair with Google Highway vectors, compiled per target of
// dtensor/ops/common/detail/simd_config.h and chosen at run time: float32 elements are widened to
// double in registers, the sums kept in kAcc independent vector accumulators (the order of the
// additions differs from a sequential loop, each partial sum is still double). Batch norm's
// statistics are a full pass over the activation, as its gradient is: a scalar double loop here was
// the largest part of its time. The products of float32 elements are exact in double, so g * scale
// computed in double lanes and rounded is the float32 product.
#include <algorithm>

#include "dtensor/ops/norm/detail/batch_norm_kernels.h"
#include "dtensor/tensor/error.h"

#define HWY_TARGET_INCLUDE "dtensor/ops/norm/batch_norm_cpu.cc"
#include "dtensor/ops/common/detail/simd_kernel-inl.h"  // IWYU pragma: keep

HWY_BEFORE_NAMESPACE();
namespace dtensor::detail::HWY_NAMESPACE {
namespace {

// v rounded to T (float or double) at p.
template <typename T>
HWY_INLINE void StoreNarrow(VD v, T* HWY_RESTRICT p) {
  const DD dd;
  if constexpr (std::is_same_v<T, double>) {
    hn::StoreU(v, dd, p);
  } else {
    const hn::Rebind<float, DD> df;
    hn::StoreU(hn::DemoteTo(df, v), df, p);
  }
}

template <typename T>
void Sums(const T* HWY_RESTRICT x, int64_t n, int64_t c, int64_t l, double* HWY_RESTRICT out) {
  const DD dd;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  for (int64_t k = 0; k < c; ++k) {
    VD s[kAcc], q[kAcc];
    for (int u = 0; u < kAcc; ++u) s[u] = q[u] = hn::Zero(dd);
    double st = 0, qt = 0;  // the rows' tails
    for (int64_t i = 0; i < n; ++i) {
      const T* p = x + (i * c + k) * l;
      int64_t j = 0;
      for (; j + kAcc * lanes <= l; j += kAcc * lanes) {
        for (int u = 0; u < kAcc; ++u) {
          const VD v = LoadDouble(p + j + u * lanes);
          s[u] = hn::Add(s[u], v);
          q[u] = hn::Add(q[u], hn::Mul(v, v));
        }
      }
      for (; j + lanes <= l; j += lanes) {
        const VD v = LoadDouble(p + j);
        s[0] = hn::Add(s[0], v);
        q[0] = hn::Add(q[0], hn::Mul(v, v));
      }
      for (; j < l; ++j) {
        const double v = static_cast<double>(p[j]);
        st += v;
        qt += v * v;
      }
    }
    const VD sv = hn::Add(hn::Add(s[0], s[1]), hn::Add(s[2], s[3]));
    const VD qv = hn::Add(hn::Add(q[0], q[1]), hn::Add(q[2], q[3]));
    out[k] = hn::GetLane(hn::SumOfLanes(dd, sv)) + st;
    out[c + k] = hn::GetLane(hn::SumOfLanes(dd, qv)) + qt;
  }
}

template <typename T>
void SumsBackward(const double* HWY_RESTRICT g, const T* HWY_RESTRICT x, int64_t n, int64_t c,
                  int64_t l, T* HWY_RESTRICT gx) {
  const DD dd;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < c; ++k) {
      const double a = g[k], b = 2 * g[c + k];
      const VD va = hn::Set(dd, a), vb = hn::Set(dd, b);
      const int64_t o = (i * c + k) * l;
      int64_t j = 0;
      // Mul then Add (no fused multiply-add), as the scalar tail rounds.
      for (; j + lanes <= l; j += lanes) {
        StoreNarrow(hn::Add(va, hn::Mul(vb, LoadDouble(x + o + j))), gx + o + j);
      }
      for (; j < l; ++j) gx[o + j] = static_cast<T>(a + b * static_cast<double>(x[o + j]));
    }
  }
}

// The contiguous run of l elements at x through f(v) into y, in full vectors of T; the tail
// through a padded vector too, so that every element is computed alike.
template <typename T, class F>
HWY_INLINE void MapRow(const T* HWY_RESTRICT x, int64_t l, T* HWY_RESTRICT y, const F& f) {
  const hn::ScalableTag<T> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t j = 0;
  for (; j + lanes <= l; j += lanes) hn::StoreU(f(hn::LoadU(d, x + j)), d, y + j);
  if (j < l) {
    HWY_ALIGN T buf[hn::MaxLanes(d)] = {};
    std::copy(x + j, x + l, buf);
    hn::Store(f(hn::Load(d, buf)), d, buf);
    std::copy(buf, buf + (l - j), y + j);
  }
}

template <typename T>
void Affine(const T* HWY_RESTRICT x, const T* HWY_RESTRICT f, int64_t n, int64_t c, int64_t l,
            T* HWY_RESTRICT y) {
  const hn::ScalableTag<T> d;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < c; ++k) {
      const auto s = hn::Set(d, f[k]), t = hn::Set(d, f[c + k]);
      const int64_t o = (i * c + k) * l;
      MapRow(x + o, l, y + o, [&](auto v) { return hn::Add(hn::Mul(v, s), t); });
    }
  }
}

template <typename T>
void AffineBackward(const T* HWY_RESTRICT g, const T* HWY_RESTRICT x, const T* HWY_RESTRICT f,
                    int64_t n, int64_t c, int64_t l, T* HWY_RESTRICT gx,
                    double* HWY_RESTRICT sums) {
  const DD dd;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  for (int64_t k = 0; k < c; ++k) {
    const double s = static_cast<double>(f[k]);
    const VD vs = hn::Set(dd, s);
    VD gxs[2] = {hn::Zero(dd), hn::Zero(dd)}, gs[2] = {hn::Zero(dd), hn::Zero(dd)};
    double gxt = 0, gt = 0;  // the rows' tails
    for (int64_t i = 0; i < n; ++i) {
      const int64_t o = (i * c + k) * l;
      int64_t j = 0;
      for (; j + 2 * lanes <= l; j += 2 * lanes) {
        for (int u = 0; u < 2; ++u) {
          const VD vg = LoadDouble(g + o + j + u * lanes);
          gxs[u] = hn::Add(gxs[u], hn::Mul(vg, LoadDouble(x + o + j + u * lanes)));
          gs[u] = hn::Add(gs[u], vg);
          StoreNarrow(hn::Mul(vg, vs), gx + o + j + u * lanes);
        }
      }
      for (; j < l; ++j) {
        const double v = static_cast<double>(g[o + j]);
        gxt += v * static_cast<double>(x[o + j]);
        gt += v;
        gx[o + j] = static_cast<T>(v * s);
      }
    }
    sums[k] = hn::GetLane(hn::SumOfLanes(dd, hn::Add(gxs[0], gxs[1]))) + gxt;
    sums[c + k] = hn::GetLane(hn::SumOfLanes(dd, hn::Add(gs[0], gs[1]))) + gt;
  }
}

}  // namespace

void BatchNormAffineF(DType dt, const void* x, const void* f, int64_t n, int64_t c, int64_t l,
                      void* y) {
  if (dt == kFloat64) {
    Affine(static_cast<const double*>(x), static_cast<const double*>(f), n, c, l,
           static_cast<double*>(y));
  } else {
    Affine(static_cast<const float*>(x), static_cast<const float*>(f), n, c, l,
           static_cast<float*>(y));
  }
}

void BatchNormAffineBackwardF(DType dt, const void* g, const void* x, const void* f, int64_t n,
                              int64_t c, int64_t l, void* gx, double* sums) {
  if (dt == kFloat64) {
    AffineBackward(static_cast<const double*>(g), static_cast<const double*>(x),
                   static_cast<const double*>(f), n, c, l, static_cast<double*>(gx), sums);
  } else {
    AffineBackward(static_cast<const float*>(g), static_cast<const float*>(x),
                   static_cast<const float*>(f), n, c, l, static_cast<float*>(gx), sums);
  }
}

void BatchNormSumsF(DType dt, const void* x, int64_t n, int64_t c, int64_t l, double* out) {
  if (dt == kFloat64) {
    Sums(static_cast<const double*>(x), n, c, l, out);
  } else {
    Sums(static_cast<const float*>(x), n, c, l, out);
  }
}

void BatchNormSumsBackwardF(DType dt, const double* g, const void* x, int64_t n, int64_t c,
                            int64_t l, void* gx) {
  if (dt == kFloat64) {
    SumsBackward(g, static_cast<const double*>(x), n, c, l, static_cast<double*>(gx));
  } else {
    SumsBackward(g, static_cast<const float*>(x), n, c, l, static_cast<float*>(gx));
  }
}

}  // namespace dtensor::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dtensor::detail {

HWY_EXPORT(BatchNormSumsF);
HWY_EXPORT(BatchNormSumsBackwardF);
HWY_EXPORT(BatchNormAffineF);
HWY_EXPORT(BatchNormAffineBackwardF);

namespace {

void check_dtype(const Tensor& x, const char* op) {
  DT_CHECK(x.dtype() == kFloat64 || x.dtype() == kFloat32, "[%s] unexpected dtype %s", op,
           dtype_name(x.dtype()));
}

}  // namespace

void batch_norm_sums_cpu(const Tensor& x, int64_t n, int64_t c, int64_t l, const Tensor& out) {
  check_dtype(x, "batch_norm_sums");
  HWY_DYNAMIC_DISPATCH(BatchNormSumsF)
  (x.dtype(), x.data_ptr(), n, c, l, static_cast<double*>(out.data_ptr()));
}

void batch_norm_sums_backward_cpu(const Tensor& g, const Tensor& x, int64_t n, int64_t c, int64_t l,
                                  const Tensor& gx) {
  check_dtype(x, "batch_norm_sums_backward");
  HWY_DYNAMIC_DISPATCH(BatchNormSumsBackwardF)
  (x.dtype(), static_cast<const double*>(g.data_ptr()), x.data_ptr(), n, c, l, gx.data_ptr());
}

void batch_norm_affine_cpu(const Tensor& x, const Tensor& f, int64_t n, int64_t c, int64_t l,
                           const Tensor& y) {
  check_dtype(x, "batch_norm_affine");
  HWY_DYNAMIC_DISPATCH(BatchNormAffineF)
  (x.dtype(), x.data_ptr(), f.data_ptr(), n, c, l, y.data_ptr());
}

void batch_norm_affine_backward_cpu(const Tensor& g, const Tensor& x, const Tensor& f, int64_t n,
                                    int64_t c, int64_t l, const Tensor& gx, const Tensor& sums) {
  check_dtype(x, "batch_norm_affine_backward");
  HWY_DYNAMIC_DISPATCH(BatchNormAffineBackwardF)
  (x.dtype(), g.data_ptr(), x.data_ptr(), f.data_ptr(), n, c, l, gx.data_ptr(),
   static_cast<double*>(sums.data_ptr()));
}

}  // namespace dtensor::detail
#endif  // HWY_ONCE
