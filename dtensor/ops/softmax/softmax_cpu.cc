// CPU softmax / log_softmax and their backward kernels, vectorised with Google Highway and
// compiled for each target of dtensor/ops/common/detail/simd_config.h (runtime dispatch).
//
// The input is viewed as [outer, d, inner] (contiguous). When the softmax dim is the last one
// (inner == 1) each row of d elements is processed in place by the row kernels below. Otherwise
// groups of up to kGatherCols columns are gathered into contiguous rows of the compute type, run
// through the same row kernels and scattered back, so every layout gives the same values.
#include "dtensor/ops/softmax/detail/softmax_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/common/detail/dim_layout.h"
#include "dtensor/ops/common/detail/parallel_for.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

#define HWY_TARGET_INCLUDE "dtensor/ops/softmax/softmax_cpu.cc"
#include "dtensor/ops/common/detail/simd_kernel-inl.h"  // IWYU pragma: keep

HWY_BEFORE_NAMESPACE();
namespace dtensor::detail::HWY_NAMESPACE {
namespace {

// Vectors per block of the online max/sum pass: one horizontal max per block.
constexpr int kBlockVecs = 4;

template <typename T>
int64_t BlockSize() {
  return kBlockVecs * static_cast<int64_t>(hn::Lanes(ComputeTag<T>()));
}

// Softmax (log = false) or log-softmax of one contiguous row of n > 0 elements, in two passes
// over it.
//
// Pass 1 walks blocks of kBlockVecs vectors: the block's maximum raises the running maximum m
// when larger, and the running sums are then rescaled by e^(m_old - m) (rare after the first
// blocks); the block's exponentials e^(x - m) are added to the sums and, for softmax, kept in
// `e` (the output row itself when T is the compute type, else a compute-type scratch row) with
// the m they used in block_max. Pass 2 writes e * e^(m_block - m) / sum for softmax, and
// (x - m) - log(sum) for log-softmax. One exponential per element in all.
//
// A row holding NaN or +inf, or only -inf, gives NaN everywhere, as PyTorch's
// exp(x - max) / sum does.
//
// `stats`, when given, receives the row's max m and its sum of e^(x - m) (0 for a row of only
// -inf, which sees no key when it is a row of attention scores; both NaN for a row holding NaN,
// the sum NaN for a row holding +inf).
template <typename T>
void SoftmaxRow(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, int64_t n, bool log,
                simd_compute_t<T>* HWY_RESTRICT scratch, simd_compute_t<T>* HWY_RESTRICT block_max,
                simd_compute_t<T>* HWY_RESTRICT stats = nullptr) {
  using A = simd_compute_t<T>;
  const ComputeTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t bs = kBlockVecs * lanes;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  A* e = nullptr;
  if (!log) {
    if constexpr (std::is_same_v<T, A>) {
      e = y;
    } else {
      e = scratch;
    }
  }

  A m = kNegInf;
  V s[kBlockVecs];
  for (auto& v : s) v = hn::Zero(d);
  auto nan = hn::Lt(hn::Zero(d), hn::Zero(d));  // all false
  for (int64_t b = 0, i0 = 0; i0 < n; ++b, i0 += bs) {
    const bool full = i0 + bs <= n;
    V v[kBlockVecs];
    HWY_ALIGN A tail[kBlockVecs * hn::MaxLanes(d)];
    if (full) {
      for (int k = 0; k < kBlockVecs; ++k) v[k] = LoadC(d, x + i0 + k * lanes);
    } else {
      // The last, partial block, padded with -inf (which adds e^-inf = 0 to the sums).
      for (int64_t j = 0; j < bs; ++j) {
        tail[j] = i0 + j < n ? static_cast<A>(static_cast<compute_t<T>>(x[i0 + j])) : kNegInf;
      }
      for (int k = 0; k < kBlockVecs; ++k) v[k] = hn::Load(d, tail + k * lanes);
    }
    V vmax = v[0];
    auto vnan = hn::IsNaN(v[0]);
    for (int k = 1; k < kBlockVecs; ++k) {
      vmax = hn::Max(vmax, v[k]);
      vnan = hn::Or(vnan, hn::IsNaN(v[k]));
    }
    nan = hn::Or(nan, vnan);
    const A bm = hn::GetLane(hn::MaxOfLanes(d, vmax));
    if (bm > m) {
      const V f = hn::Set(d, std::exp(m - bm));
      for (auto& acc : s) acc = hn::Mul(acc, f);
      m = bm;
    }
    // While the row has seen only -inf, shift by 0: e^(-inf - 0) = 0, where -inf - (-inf) would
    // hand the exponential a NaN (whose result ExpNonPositive leaves unspecified).
    const V vm = hn::Set(d, m == kNegInf ? A(0) : m);
    for (int k = 0; k < kBlockVecs; ++k) {
      const V ek = ExpNonPositive(d, hn::Sub(v[k], vm));
      s[k] = hn::Add(s[k], ek);
      if (e == nullptr) continue;
      if (full) {
        hn::StoreU(ek, d, e + i0 + k * lanes);
      } else {
        hn::Store(ek, d, tail + k * lanes);
      }
    }
    if (e != nullptr) {
      if (!full) std::copy(tail, tail + (n - i0), e + i0);
      block_max[b] = m;
    }
  }
  const A sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s[0], s[1]), hn::Add(s[2], s[3]))));
  if (stats != nullptr) {
    const bool has_nan = !hn::AllFalse(d, nan);
    stats[0] = has_nan ? std::numeric_limits<A>::quiet_NaN() : m;
    // A +inf entry makes every e^(x - m) undefined, as it makes the probabilities NaN.
    stats[1] = has_nan || m == -kNegInf ? std::numeric_limits<A>::quiet_NaN()
               : m == kNegInf           ? A(0)
                                        : sum;
  }
  if (!hn::AllFalse(d, nan) || !std::isfinite(m)) {
    std::fill(y, y + n, static_cast<T>(std::numeric_limits<compute_t<T>>::quiet_NaN()));
    return;
  }

  if (log) {
    const V vm = hn::Set(d, m), vls = hn::Set(d, std::log(sum));
    MapRow(
        y, n, [&](auto, V xv) { return hn::Sub(hn::Sub(xv, vm), vls); }, x);
    return;
  }
  const A inv = A(1) / sum;
  for (int64_t b = 0, i0 = 0; i0 < n; ++b, i0 += bs) {
    // Blocks after the last rise of the running maximum used the final one: no exp call.
    const V f = hn::Set(d, block_max[b] == m ? inv : std::exp(block_max[b] - m) * inv);
    const int64_t len = std::min(bs, n - i0);
    if constexpr (std::is_same_v<T, A>) {
      MapRow(
          y + i0, len, [&](auto, V ev) { return hn::Mul(ev, f); }, e + i0);
    } else {
      // e is a float scratch row: scale it and round to T.
      const int64_t whole = len / lanes * lanes;
      for (int64_t i = 0; i < whole; i += lanes) {
        StoreC(d, hn::Mul(hn::LoadU(d, e + i0 + i), f), y + i0 + i);
      }
      if (whole < len) {
        HWY_ALIGN A buf[hn::MaxLanes(d)] = {};
        T out[hn::MaxLanes(d)];
        std::copy(e + i0 + whole, e + i0 + len, buf);
        StoreC(d, hn::Mul(hn::Load(d, buf), f), out);
        std::copy(out, out + (len - whole), y + i0 + whole);
      }
    }
  }
}

// Backward of one contiguous row: softmax (y = output) gx = y * (g - sum(g * y)); log-softmax
// (y = output) gx = g - e^y * sum(g).
template <typename T>
void SoftmaxBackwardRow(const T* HWY_RESTRICT g, const T* HWY_RESTRICT y, T* HWY_RESTRICT gx,
                        int64_t n, bool log) {
  using V = hn::Vec<ComputeTag<T>>;
  if (log) {
    const auto sum = SumMap<T>(
        n, [](auto, V gv) { return gv; }, g);
    const auto ds = [&](auto d, V gv, V yv) {
      return hn::NegMulAdd(ExpC(d, yv), hn::Set(d, sum), gv);
    };
    MapRow(gx, n, ds, g, y);
  } else {
    const auto dot = SumMap<T>(
        n, [](auto, V gv, V yv) { return hn::Mul(gv, yv); }, g, y);
    const auto ds = [&](auto d, V gv, V yv) { return hn::Mul(yv, hn::Sub(gv, hn::Set(d, dot))); };
    MapRow(gx, n, ds, g, y);
  }
}

// Columns gathered at a time when the softmax dim is not the last; capped so that the gathered
// rows stay within kGatherElems elements.
constexpr int64_t kGatherCols = 16;
constexpr int64_t kGatherElems = int64_t{1} << 16;

int64_t GatherWidth(int64_t d, int64_t inner) {
  return std::max<int64_t>(1,
                           std::min({kGatherCols, inner, kGatherElems / std::max<int64_t>(d, 1)}));
}

// Copies columns [j0, j0 + cols) of the [d, inner] slab at src into `cols` contiguous rows of d
// compute-type elements.
template <typename T>
void GatherCols(const T* src, simd_compute_t<T>* dst, int64_t d, int64_t inner, int64_t j0,
                int64_t cols) {
  for (int64_t i = 0; i < d; ++i) {
    const T* p = src + i * inner + j0;
    for (int64_t c = 0; c < cols; ++c) {
      dst[c * d + i] = static_cast<simd_compute_t<T>>(static_cast<compute_t<T>>(p[c]));
    }
  }
}

template <typename T>
void ScatterCols(const simd_compute_t<T>* src, T* dst, int64_t d, int64_t inner, int64_t j0,
                 int64_t cols) {
  for (int64_t i = 0; i < d; ++i) {
    T* p = dst + i * inner + j0;
    for (int64_t c = 0; c < cols; ++c) {
      p[c] = convert<T>(static_cast<compute_t<T>>(src[c * d + i]));
    }
  }
}

// `stats` (inner == 1 only, T its own compute type), when given, receives each row's max and sum
// of exponentials at stats[2 * row] and stats[2 * row + 1] (SoftmaxRow).
template <typename T>
void SoftmaxTyped(const T* x, T* y, int64_t outer, int64_t d, int64_t inner, bool log,
                  simd_compute_t<T>* stats) {
  using A = simd_compute_t<T>;
  const int64_t nblocks = (d + BlockSize<T>() - 1) / BlockSize<T>();
  std::vector<A> block_max(static_cast<size_t>(nblocks));
  if (inner == 1) {
    std::vector<A> scratch(std::is_same_v<T, A> || log ? 0 : static_cast<size_t>(d));
    for (int64_t o = 0; o < outer; ++o) {
      SoftmaxRow(x + o * d, y + o * d, d, log, scratch.data(), block_max.data(),
                 stats == nullptr ? nullptr : stats + 2 * o);
    }
    return;
  }
  const int64_t cols = GatherWidth(d, inner);
  std::vector<A> in(static_cast<size_t>(cols * d)), out(in.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j0 = 0; j0 < inner; j0 += cols) {
      const int64_t c = std::min(cols, inner - j0);
      GatherCols(x + o * d * inner, in.data(), d, inner, j0, c);
      for (int64_t k = 0; k < c; ++k) {
        SoftmaxRow<A>(in.data() + k * d, out.data() + k * d, d, log, nullptr, block_max.data());
      }
      ScatterCols(out.data(), y + o * d * inner, d, inner, j0, c);
    }
  }
}

template <typename T>
void SoftmaxBackwardTyped(const T* g, const T* y, T* gx, int64_t outer, int64_t d, int64_t inner,
                          bool log) {
  using A = simd_compute_t<T>;
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o)
      SoftmaxBackwardRow(g + o * d, y + o * d, gx + o * d, d, log);
    return;
  }
  const int64_t cols = GatherWidth(d, inner);
  std::vector<A> gb(static_cast<size_t>(cols * d)), yb(gb.size()), out(gb.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j0 = 0; j0 < inner; j0 += cols) {
      const int64_t c = std::min(cols, inner - j0);
      GatherCols(g + o * d * inner, gb.data(), d, inner, j0, c);
      GatherCols(y + o * d * inner, yb.data(), d, inner, j0, c);
      for (int64_t k = 0; k < c; ++k) {
        SoftmaxBackwardRow<A>(gb.data() + k * d, yb.data() + k * d, out.data() + k * d, d, log);
      }
      ScatterCols(out.data(), gx + o * d * inner, d, inner, j0, c);
    }
  }
}

}  // namespace

// Entry points of this target (exported below): contiguous tensors of dtype dt viewed as
// [outer, d, inner], softmax along d; `stats` as SoftmaxTyped's (float32 / float64 only).
void SoftmaxForward(DType dt, const void* x, void* y, int64_t outer, int64_t d, int64_t inner,
                    bool log, void* stats) {
  dispatch_floating(dt, "softmax", [&]<typename T>() {
    SoftmaxTyped(static_cast<const T*>(x), static_cast<T*>(y), outer, d, inner, log,
                 static_cast<simd_compute_t<T>*>(stats));
  });
}

void SoftmaxBackward(DType dt, const void* g, const void* y, void* gx, int64_t outer, int64_t d,
                     int64_t inner, bool log) {
  dispatch_floating(dt, "softmax_backward", [&]<typename T>() {
    SoftmaxBackwardTyped(static_cast<const T*>(g), static_cast<const T*>(y), static_cast<T*>(gx),
                         outer, d, inner, log);
  });
}

}  // namespace dtensor::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dtensor {
namespace detail {
HWY_EXPORT(SoftmaxForward);
HWY_EXPORT(SoftmaxBackward);

// The dispatched kernels over [outer, d, inner] contiguous tensors, in chunks of `outer` on the
// intra-op threads (each slab is computed alone, so the split changes no bit).
namespace {

// Element `offset` of contiguous t.
char* element_at(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.data_ptr()) + offset * static_cast<int64_t>(t.itemsize());
}

}  // namespace

// x into y; `stats` as SoftmaxForward's (inner == 1), or null.
void softmax_forward_rows(const Tensor& x, const Tensor& y, int64_t outer, int64_t d, int64_t inner,
                          bool log, const Tensor* stats) {
  const int64_t slab = d * inner;
  parallel_for(0, outer, row_grain(slab), [&](int64_t lo, int64_t hi) {
    HWY_DYNAMIC_DISPATCH(SoftmaxForward)
    (x.dtype(), element_at(x, lo * slab), element_at(y, lo * slab), hi - lo, d, inner, log,
     stats == nullptr ? nullptr : element_at(*stats, 2 * lo));
  });
}

// The gradient gx from grad_out g and the forward's output y.
void softmax_backward_rows(const Tensor& g, const Tensor& y, const Tensor& gx, int64_t outer,
                           int64_t d, int64_t inner, bool log) {
  const int64_t slab = d * inner;
  parallel_for(0, outer, row_grain(slab), [&](int64_t lo, int64_t hi) {
    HWY_DYNAMIC_DISPATCH(SoftmaxBackward)
    (y.dtype(), element_at(g, lo * slab), element_at(y, lo * slab), element_at(gx, lo * slab),
     hi - lo, d, inner, log);
  });
}

}  // namespace detail

}  // namespace dtensor
#endif  // HWY_ONCE
