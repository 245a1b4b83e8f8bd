// CPU layer_norm / rms_norm kernels (norm_cpu, norm_backward_cpu: the checks and the device
// switch are in norm.cc), vectorised with Google Highway and compiled for each target of
// dtensor/ops/common/detail/simd_config.h (runtime dispatch).
//
// x is viewed as [rows, n] (contiguous), n = numel(normalized_shape). Per row, layer norm makes
// three passes over the n elements (kept in cache between them): the mean, the centred sum of
// squares, the write; rms norm two: the sum of squares, the write. Sums use kSumAcc (4) vector
// accumulators.
#include "dtensor/ops/norm/detail/norm_cpu.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "dtensor/ops/common/detail/parallel_for.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

#define HWY_TARGET_INCLUDE "dtensor/ops/norm/norm_cpu.cc"
#include "dtensor/ops/common/detail/simd_kernel-inl.h"  // IWYU pragma: keep

HWY_BEFORE_NAMESPACE();
namespace dtensor::detail::HWY_NAMESPACE {
namespace {

// Calls step(i, ptrs...) for each vector of a row of n elements: i is the element offset and
// the pointers address Lanes() elements of each array. The last, partial vector runs on
// zero-padded copies (outputs copied back), so the vector code sees whole vectors only. `ins`
// are read, `outs` read and written; all pointers valid.
template <typename D, typename Step, typename... In, typename... Out>
HWY_INLINE void ForEachVector(D d, int64_t n, const Step& step, std::tuple<const In*...> ins,
                              std::tuple<Out*...> outs) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    std::apply(
        [&](const In*... in) {
          std::apply([&](Out*... out) { step(i, (in + i)..., (out + i)...); }, outs);
        },
        ins);
  }
  constexpr size_t kMax = hn::MaxLanes(d);
  // One lane (HWY_SCALAR): the loop above covered every element. The tail is compiled only for
  // wider targets, which also keeps GCC 12 from warning (-Wstringop-overflow) about tail copies
  // into a one-element buffer whose length it cannot bound.
  if constexpr (kMax > 1) {
    if (i == n) return;
    const int64_t rest = n - i;
    std::tuple<std::array<In, kMax>...> in_buf{};
    std::tuple<std::array<Out, kMax>...> out_buf{};
    [&]<size_t... I>(std::index_sequence<I...>) {
      (std::copy(std::get<I>(ins) + i, std::get<I>(ins) + n, std::get<I>(in_buf).data()), ...);
    }
    (std::index_sequence_for<In...>{});
    [&]<size_t... I>(std::index_sequence<I...>) {
      (std::copy(std::get<I>(outs) + i, std::get<I>(outs) + n, std::get<I>(out_buf).data()), ...);
    }
    (std::index_sequence_for<Out...>{});
    std::apply(
        [&](auto&... ib) {
          std::apply([&](auto&... ob) { step(i, ib.data()..., ob.data()...); }, out_buf);
        },
        in_buf);
    [&]<size_t... I>(std::index_sequence<I...>) {
      (std::copy(std::get<I>(out_buf).data(), std::get<I>(out_buf).data() + rest,
                 std::get<I>(outs) + i),
       ...);
    }
    (std::index_sequence_for<Out...>{});
  }
}

template <class D, class V>
HWY_INLINE hn::TFromD<D> SumOf(D d, const V (&acc)[kSumAcc]) {
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(acc[0], acc[1]), hn::Add(acc[2], acc[3]))));
}

// Normalises one row; returns its mean (0 for rms) and rstd = 1 / sqrt(var + eps) (var = mean
// of squares for rms). w, b may be null.
template <typename T>
void NormRow(const T* HWY_RESTRICT x, const T* w, const T* b, T* HWY_RESTRICT y, int64_t n,
             simd_compute_t<T> eps, bool rms, simd_compute_t<T>& mean_out,
             simd_compute_t<T>& rstd_out) {
  using A = simd_compute_t<T>;
  const ComputeTag<T> d;
  using V = hn::Vec<decltype(d)>;
  A mean = 0;
  if (!rms)
    mean = SumMap<T>(
               n, [](auto, V v) { return v; }, x) /
           static_cast<A>(n);
  const V vm = hn::Set(d, mean);
  // Centred (the two-pass formula, no cancellation when |mean| >> std; the row is in cache).
  const A sq = SumMap<T>(
      n,
      [&](auto, V v) {
        const V c = hn::Sub(v, vm);
        return hn::Mul(c, c);
      },
      x);
  const A var = sq / static_cast<A>(n);
  const A rstd = A(1) / std::sqrt(var + eps);
  mean_out = mean;
  rstd_out = rstd;
  const V vr = hn::Set(d, rstd);
  const auto norm = [&](V v) { return hn::Mul(hn::Sub(v, vm), vr); };
  if (w != nullptr && b != nullptr) {
    MapRow(
        y, n, [&](auto, V v, V wv, V bv) { return hn::MulAdd(norm(v), wv, bv); }, x, w, b);
  } else if (w != nullptr) {
    MapRow(
        y, n, [&](auto, V v, V wv) { return hn::Mul(norm(v), wv); }, x, w);
  } else if (b != nullptr) {
    MapRow(
        y, n, [&](auto, V v, V bv) { return hn::Add(norm(v), bv); }, x, b);
  } else {
    MapRow(
        y, n, [&](auto, V v) { return norm(v); }, x);
  }
}

// Backward of one row. With xhat = (x - mean) * rstd (mean = 0 for rms) and gw = g * w (g when
// w is null):
//   grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))      (layer norm)
//   grad_x = rstd * (gw - xhat * mean(gw * xhat))                  (rms norm)
// and the weight / bias gradients of this row, g * xhat and g, are added to dw / db (compute
// type, n elements each; null when not wanted). gx null: no input gradient.
template <typename T>
void NormBackwardRow(const T* g, const T* x, const T* w, simd_compute_t<T> mean,
                     simd_compute_t<T> rstd, T* gx, simd_compute_t<T>* dw, simd_compute_t<T>* db,
                     int64_t n, bool rms) {
  using A = simd_compute_t<T>;
  const ComputeTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const V vm = hn::Set(d, mean), vr = hn::Set(d, rstd);
  const V one = hn::Set(d, A(1));
  const auto wv_of = [&](const T* wp) { return wp != nullptr ? LoadC(d, wp) : one; };
  if (gx != nullptr) {
    // Sums of gw and gw * xhat, kSumAcc accumulators each; the zero-padded tail contributes 0
    // (g = 0 there).
    V sg[kSumAcc], sgx[kSumAcc];
    for (int k = 0; k < kSumAcc; ++k) sg[k] = sgx[k] = hn::Zero(d);
    const auto add = [&](int k, const T* gp, const T* xp, const T* wp) {
      const V gw = hn::Mul(LoadC(d, gp), wv_of(wp));
      sg[k] = hn::Add(sg[k], gw);
      sgx[k] = hn::MulAdd(gw, hn::Mul(hn::Sub(LoadC(d, xp), vm), vr), sgx[k]);
    };
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    const int64_t whole = n / (kSumAcc * lanes) * (kSumAcc * lanes);
    for (int64_t i = 0; i < whole; i += kSumAcc * lanes) {
      for (int k = 0; k < kSumAcc; ++k) {
        const int64_t j = i + k * lanes;
        add(k, g + j, x + j, w != nullptr ? w + j : nullptr);
      }
    }
    ForEachVector(
        d, n - whole,
        [&](int64_t, const T* gp, const T* xp, const T* wp) {
          add(0, gp, xp, w != nullptr ? wp : nullptr);
        },
        std::make_tuple(g + whole, x + whole, (w != nullptr ? w : g) + whole), std::tuple<>());
    const A inv_n = A(1) / static_cast<A>(n);
    const V a = hn::Set(d, rms ? A(0) : SumOf(d, sg) * inv_n);
    const V c = hn::Set(d, SumOf(d, sgx) * inv_n);
    ForEachVector(
        d, n,
        [&](int64_t, const T* gp, const T* xp, const T* wp, T* op) {
          const V gw = hn::Mul(LoadC(d, gp), wv_of(w != nullptr ? wp : nullptr));
          const V xhat = hn::Mul(hn::Sub(LoadC(d, xp), vm), vr);
          StoreC(d, hn::Mul(vr, hn::Sub(hn::Sub(gw, a), hn::Mul(xhat, c))), op);
        },
        std::make_tuple(g, x, w != nullptr ? w : g), std::make_tuple(gx));
  }
  // Weight / bias gradients: dw += g * xhat, db += g, in one pass over g (and x for dw).
  const auto add_dw = [&](const T* gp, const T* xp, A* dwp) {
    const V xhat = hn::Mul(hn::Sub(LoadC(d, xp), vm), vr);
    hn::StoreU(hn::MulAdd(LoadC(d, gp), xhat, hn::LoadU(d, dwp)), d, dwp);
  };
  const auto add_db = [&](const T* gp, A* dbp) {
    hn::StoreU(hn::Add(LoadC(d, gp), hn::LoadU(d, dbp)), d, dbp);
  };
  if (dw != nullptr && db != nullptr) {
    ForEachVector(
        d, n,
        [&](int64_t, const T* gp, const T* xp, A* dwp, A* dbp) {
          add_dw(gp, xp, dwp);
          add_db(gp, dbp);
        },
        std::make_tuple(g, x), std::make_tuple(dw, db));
  } else if (dw != nullptr) {
    ForEachVector(
        d, n, [&](int64_t, const T* gp, const T* xp, A* dwp) { add_dw(gp, xp, dwp); },
        std::make_tuple(g, x), std::make_tuple(dw));
  } else if (db != nullptr) {
    ForEachVector(
        d, n, [&](int64_t, const T* gp, A* dbp) { add_db(gp, dbp); }, std::make_tuple(g),
        std::make_tuple(db));
  }
}

}  // namespace

// Entry points of this target (exported below). x, w, b, y, g, gx: contiguous, dtype dt;
// mean, rstd, dw, db: compute type (float, or double for float64); optional ones may be null.
void NormForward(DType dt, const void* x, const void* w, const void* b, void* y, void* mean,
                 void* rstd, int64_t rows, int64_t n, double eps, bool rms) {
  dispatch_floating(dt, rms ? "rms_norm" : "layer_norm", [&]<typename T>() {
    using A = simd_compute_t<T>;
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    for (int64_t r = 0; r < rows; ++r) {
      A m = 0, rs = 0;
      NormRow(xp + r * n, static_cast<const T*>(w), static_cast<const T*>(b), yp + r * n, n,
              static_cast<A>(eps), rms, m, rs);
      if (mean != nullptr) static_cast<A*>(mean)[r] = m;
      if (rstd != nullptr) static_cast<A*>(rstd)[r] = rs;
    }
  });
}

void NormBackward(DType dt, const void* g, const void* x, const void* w, const void* mean,
                  const void* rstd, void* gx, void* dw, void* db, int64_t rows, int64_t n,
                  bool rms) {
  dispatch_floating(dt, rms ? "rms_norm_backward" : "layer_norm_backward", [&]<typename T>() {
    using A = simd_compute_t<T>;
    const T* gp = static_cast<const T*>(g);
    const T* xp = static_cast<const T*>(x);
    T* gxp = static_cast<T*>(gx);
    for (int64_t r = 0; r < rows; ++r) {
      NormBackwardRow(gp + r * n, xp + r * n, static_cast<const T*>(w),
                      rms ? A(0) : static_cast<const A*>(mean)[r], static_cast<const A*>(rstd)[r],
                      gxp != nullptr ? gxp + r * n : nullptr, static_cast<A*>(dw),
                      static_cast<A*>(db), n, rms);
    }
  });
}

}  // namespace dtensor::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dtensor {
namespace detail {
HWY_EXPORT(NormForward);
HWY_EXPORT(NormBackward);
}  // namespace detail

namespace {

// The backward splits the weight and bias gradients' sums into blocks of rows (each block after
// the first sums into its own n partial values): at most kMaxNormBlocks of them, of at least
// kMinNormBlockRows rows and kGrainSize elements, so that the partials stay a small share of
// the work (at most 1/8 of the rows' traffic) and a block is worth a thread.
constexpr int64_t kMaxNormBlocks = 64;
constexpr int64_t kMinNormBlockRows = 8;

// acc += each row of partials ([blocks - 1, n], acc's dtype), in row order: element by element
// the same sums as adding the rows one after another.
void add_partials(const Tensor& acc, const Tensor& partials) {
  if (!partials.defined()) return;
  const int64_t n = acc.numel(), count = partials.size(0);
  const auto add = [&]<typename A>() {  // A: float or double (stats_dtype)
    A* out = acc.data<A>();
    const A* p = partials.data<A>();
    for (int64_t b = 0; b < count; ++b) {
      for (int64_t i = 0; i < n; ++i) out[i] += p[b * n + i];
    }
  };
  if (acc.dtype() == kFloat64) {
    add.operator()<double>();
  } else {
    add.operator()<float>();
  }
}

// Pointer to row r of a contiguous tensor of rows of `row` elements (null for an undefined one).
class RowPtr {
 public:
  RowPtr(const Tensor& t, int64_t row)
      : base_(t.defined() ? static_cast<char*>(t.data_ptr()) : nullptr),
        row_bytes_(row * (t.defined() ? static_cast<int64_t>(t.itemsize()) : 0)) {}
  void* operator()(int64_t r) const { return base_ == nullptr ? nullptr : base_ + r * row_bytes_; }

 private:
  char* base_;
  int64_t row_bytes_;
};

double default_eps(DType d, std::optional<double> eps) {
  if (eps.has_value()) return *eps;
  return d == kFloat64 ? std::numeric_limits<double>::epsilon()
                       : std::numeric_limits<float>::epsilon();
}

}  // namespace

namespace detail {

Tensor norm_cpu(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                std::optional<double> eps, bool rms, const Tensor& mean, const Tensor& rstd) {
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype()));
  if (x.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  // Rows are independent: chunks of them on the intra-op threads.
  const RowPtr xr(xc, n), yr(out, n);
  const RowPtr mr(mean, 1), rr(rstd, 1);
  parallel_for(0, x.numel() / n, row_grain(n), [&](int64_t lo, int64_t hi) {
    HWY_DYNAMIC_DISPATCH(NormForward)
    (x.dtype(), xr(lo), wc.defined() ? wc.data_ptr() : nullptr,
     bc.defined() ? bc.data_ptr() : nullptr, yr(lo), mr(lo), rr(lo), hi - lo, n,
     default_eps(x.dtype(), eps), rms);
  });
  return out;
}

void norm_backward_cpu(const Tensor& grad_out, const Tensor& x, int64_t n, const Tensor& mean,
                       const Tensor& rstd, const Tensor& weight, bool rms, const Tensor& gx,
                       const Tensor& dw, const Tensor& db) {
  const TensorOptions acc_opts(norm_stats_dtype(x.dtype()), x.device());
  const Tensor gc = grad_out.contiguous(), xc = x.contiguous();
  const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor mc = rms ? Tensor() : mean.contiguous(), rc = rstd.contiguous();
  // Blocks of rows, each on one thread. The weight and bias gradients are sums over rows:
  // block 0 adds into dw / db, every other block into its own zeroed row of partials, added
  // to dw / db in block order after. The blocks depend on the shape alone, so the sums (and
  // so the bits) are the same on any number of threads.
  const int64_t rows = x.numel() / n;
  const int64_t block =
      std::max({row_grain(n), kMinNormBlockRows, (rows + kMaxNormBlocks - 1) / kMaxNormBlocks});
  const int64_t blocks = (rows + block - 1) / block;
  const auto partials = [&](const Tensor& t) {
    return t.defined() && blocks > 1 ? zeros({blocks - 1, n}, acc_opts) : Tensor();
  };
  const Tensor pdw = partials(dw), pdb = partials(db);
  const RowPtr gr(gc, n), xr(xc, n), gxr(gx, n), mr(mc, 1), rr(rc, 1), pdwr(pdw, n), pdbr(pdb, n);
  const auto acc = [&](const Tensor& t, const RowPtr& p, int64_t b) {
    return b == 0 ? (t.defined() ? t.data_ptr() : nullptr) : p(b - 1);
  };
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const int64_t r0 = b * block, r1 = std::min(rows, r0 + block);
      HWY_DYNAMIC_DISPATCH(NormBackward)
      (x.dtype(), gr(r0), xr(r0), wc.defined() ? wc.data_ptr() : nullptr, mr(r0), rr(r0), gxr(r0),
       acc(dw, pdwr, b), acc(db, pdbr, b), r1 - r0, n, rms);
    }
  });
  if (dw.defined()) add_partials(dw, pdw);
  if (db.defined()) add_partials(db, pdb);
}

}  // namespace detail
}  // namespace dtensor
#endif  // HWY_ONCE
