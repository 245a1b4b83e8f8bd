// CPU reduction kernels. Floating inputs accumulate in double, integers in int64.
//
// The contiguous runs of floating inputs (sum, mean, var's squared deviations, max/min, and the
// whole-row accumulation of an outer reduction) go through vector kernels written with Google
// Highway, compiled for each target of dtensor/ops/common/detail/simd_config.h and dispatched at
// run time: float32 / 16-bit elements are widened to double in vector registers and summed in kAcc
// independent vector accumulators (16 partial sums with AVX2), which changes the order of the
// additions only (each partial sum is still double). Runs shorter than kMinSimd elements keep
// the scalar loops, where the dispatch would cost more than it saves.
#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "dtensor/ops/reduction/detail/reduction_kernels.h"
#include "dtensor/tensor/convert.h"

#define HWY_TARGET_INCLUDE "dtensor/ops/reduction/reduction_cpu.cc"
#include "dtensor/ops/common/detail/simd_kernel-inl.h"  // IWYU pragma: keep

HWY_BEFORE_NAMESPACE();
namespace dtensor::detail::HWY_NAMESPACE {
namespace {

// sum_i f(x[i] as double) over n contiguous elements; the lanes past the end are masked out.
template <typename T, class F>
HWY_INLINE double SumDouble(const T* HWY_RESTRICT p, int64_t n, const F& f) {
  const DD dd;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  VD acc[kAcc];
  for (auto& a : acc) a = hn::Zero(dd);
  int64_t i = 0;
  for (; i + kAcc * lanes <= n; i += kAcc * lanes) {
    for (int k = 0; k < kAcc; ++k) acc[k] = hn::Add(acc[k], f(LoadDouble(p + i + k * lanes)));
  }
  for (; i < n; i += lanes) {
    T buf[hn::MaxLanes(dd)] = {};
    const int64_t len = std::min(lanes, n - i);
    std::copy(p + i, p + i + len, buf);
    const auto valid = hn::FirstN(dd, static_cast<size_t>(len));
    acc[0] = hn::Add(acc[0], hn::IfThenElseZero(valid, f(LoadDouble(buf))));
  }
  return hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(acc[0], acc[1]), hn::Add(acc[2], acc[3]))));
}

// Largest (kMax) or smallest of n > 0 contiguous elements in their compute type; NaN when any
// is NaN.
template <bool kMax, typename T>
HWY_INLINE double MaxMinRow(const T* HWY_RESTRICT p, int64_t n) {
  const ComputeTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto pick = [](V a, V b) { return kMax ? hn::Max(a, b) : hn::Min(a, b); };
  V acc[kAcc];
  for (auto& a : acc) a = hn::Set(d, static_cast<simd_compute_t<T>>(p[0]));
  auto nan = hn::IsNaN(acc[0]);
  int64_t i = 0;
  for (; i + kAcc * lanes <= n; i += kAcc * lanes) {
    for (int k = 0; k < kAcc; ++k) {
      const V v = LoadC(d, p + i + k * lanes);
      nan = hn::Or(nan, hn::IsNaN(v));
      acc[k] = pick(acc[k], v);
    }
  }
  for (; i < n; i += lanes) {
    T buf[hn::MaxLanes(d)];
    std::fill(buf, buf + hn::MaxLanes(d), p[0]);  // padding that cannot win
    std::copy(p + i, p + std::min(n, i + lanes), buf);
    const V v = LoadC(d, buf);
    nan = hn::Or(nan, hn::IsNaN(v));
    acc[0] = pick(acc[0], v);
  }
  if (!hn::AllFalse(d, nan)) return std::numeric_limits<double>::quiet_NaN();
  const V r = pick(pick(acc[0], acc[1]), pick(acc[2], acc[3]));
  return hn::GetLane(kMax ? hn::MaxOfLanes(d, r) : hn::MinOfLanes(d, r));
}

}  // namespace

// Entry points of this target (exported below); p: n contiguous elements of floating dtype dt.

// sum of the elements (squares = false) or of their squared deviations from m, in double.
double SumRowF(DType dt, const void* p, int64_t n, bool squares, double m) {
  return dispatch_floating(dt, "sum", [&]<typename T>() {
    const T* x = static_cast<const T*>(p);
    if (!squares) return SumDouble(x, n, [](VD v) { return v; });
    const VD vm = hn::Set(DD(), m);
    return SumDouble(x, n, [&](VD v) {
      const VD c = hn::Sub(v, vm);
      return hn::Mul(c, c);
    });
  });
}

// acc[j] += p[j] for j < n (acc in double).
void AccumulateRowF(DType dt, const void* p, double* acc, int64_t n) {
  dispatch_floating(dt, "sum", [&]<typename T>() {
    const T* x = static_cast<const T*>(p);
    const DD dd;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
    int64_t j = 0;
    for (; j + lanes <= n; j += lanes) {
      hn::StoreU(hn::Add(hn::LoadU(dd, acc + j), LoadDouble(x + j)), dd, acc + j);
    }
    for (; j < n; ++j) acc[j] += static_cast<double>(static_cast<compute_t<T>>(x[j]));
  });
}

double MaxMinRowF(DType dt, const void* p, int64_t n, bool is_max) {
  return dispatch_floating(dt, "amax", [&]<typename T>() {
    const T* x = static_cast<const T*>(p);
    return is_max ? MaxMinRow<true>(x, n) : MaxMinRow<false>(x, n);
  });
}

}  // namespace dtensor::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dtensor::detail {

HWY_EXPORT(SumRowF);
HWY_EXPORT(AccumulateRowF);
HWY_EXPORT(MaxMinRowF);

namespace {

// Shortest contiguous run worth a call through the dispatch table.
constexpr int64_t kMinSimd = 16;

template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<compute_t<T>>;

template <typename T>
using acc_t = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, int64_t>;

template <typename T>
DT_FORCE_INLINE acc_t<T> to_acc(T v) {
  return static_cast<acc_t<T>>(static_cast<compute_t<T>>(v));
}

// Sum of n elements `stride` apart. Contiguous rows use eight independent accumulators, which
// the compiler keeps in vector registers (the order differs from a sequential loop only by
// rounding).
template <typename T>
acc_t<T> sum_row(const T* p, int64_t n, int64_t stride) {
  using A = acc_t<T>;
  if constexpr (is_float_v<T>) {
    if (stride == 1 && n >= kMinSimd) {
      return HWY_DYNAMIC_DISPATCH(SumRowF)(dtype_of_v<T>, p, n, false, 0.0);
    }
  }
  if (stride != 1) {
    A acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += to_acc(p[i * stride]);
    return acc;
  }
  constexpr int kLanes = 8;
  A lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += to_acc(p[i + j]);
  }
  for (; i < n; ++i) lanes[0] += to_acc(p[i]);
  A acc = 0;
  for (int j = 0; j < kLanes; ++j) acc += lanes[j];
  return acc;
}

template <typename T>
acc_t<T> sum_of(const T* in, const ReducePlan& plan, int64_t base) {
  acc_t<T> acc = 0;
  for_each_reduce_row(plan, base, [&](int64_t off, int64_t n, int64_t stride) {
    acc += sum_row(in + off, n, stride);
  });
  return acc;
}

// Whether the innermost kept dim is contiguous in the input while the reduced elements are
// not: then sum/mean/max/min walk whole input rows and reduce K outputs at once (vectorisable,
// cache friendly) instead of one strided walk per output, e.g. for sum over dim 0 of [N, K].
bool use_outer_reduction(const ReducePlan& plan) {
  return plan.out_numel > 0 && !plan.kept_sizes.empty() && plan.kept_strides.back() == 1 &&
         !plan.red_sizes.empty() && plan.red_strides.back() != 1 && plan.red_numel > 0;
}

// The plan without its innermost kept dim, which must be contiguous in the input (see
// use_outer_reduction): each output "row" of k elements is reduced over whole input rows.
ReducePlan outer_rows(const ReducePlan& plan) {
  ReducePlan rows = plan;
  rows.kept_sizes.pop_back();
  rows.kept_strides.pop_back();
  rows.out_numel = plan.out_numel / plan.kept_sizes.back();
  return rows;
}

// o[j] = finish(sum of the reduced elements of output j) via whole-row accumulation.
template <typename T, typename O, typename Finish>
void outer_sum(O* o, const T* in, const ReducePlan& plan, Finish finish) {
  using A = acc_t<T>;
  const int64_t k = plan.kept_sizes.back();
  std::vector<A> acc(static_cast<size_t>(k));
  for_each_reduce_output(outer_rows(plan), [&](int64_t r, int64_t base) {
    std::fill(acc.begin(), acc.end(), A(0));
    A* a = acc.data();
    for_each_reduce_row(plan, base, [&](int64_t off, int64_t n, int64_t stride) {
      for (int64_t i = 0; i < n; ++i) {
        const T* p = in + off + i * stride;
        if constexpr (is_float_v<T>) {
          if (k >= kMinSimd) {
            HWY_DYNAMIC_DISPATCH(AccumulateRowF)(dtype_of_v<T>, p, a, k);
            continue;
          }
        }
        for (int64_t j = 0; j < k; ++j) a[j] += to_acc(p[j]);
      }
    });
    O* dst = o + r * k;
    for (int64_t j = 0; j < k; ++j) dst[j] = finish(a[j]);
  });
}

template <typename T>
void sum_mean_var(ReduceOp op, const Tensor& out, const T* in, const ReducePlan& plan,
                  int64_t correction) {
  using A = acc_t<T>;
  if (op != ReduceOp::kVar && op != ReduceOp::kStd && use_outer_reduction(plan)) {
    if constexpr (std::is_floating_point_v<A>) {
      const double n = static_cast<double>(plan.red_numel);
      if (op == ReduceOp::kSum) {
        outer_sum(out.data<T>(), in, plan, [](double v) { return convert<T>(v); });
      } else {
        outer_sum(out.data<T>(), in, plan, [n](double v) { return convert<T>(v / n); });
      }
      return;
    } else if (op == ReduceOp::kSum) {
      outer_sum(out.data<int64_t>(), in, plan, [](int64_t v) { return v; });
      return;
    }
  }
  if (op == ReduceOp::kSum && !std::is_floating_point_v<A>) {
    int64_t* o = out.data<int64_t>();
    for_each_reduce_output(plan, [&](int64_t oi, int64_t base) { o[oi] = sum_of(in, plan, base); });
    return;
  }
  if constexpr (std::is_floating_point_v<A>) {
    T* o = out.data<T>();
    const double n = static_cast<double>(plan.red_numel);
    for_each_reduce_output(plan, [&](int64_t oi, int64_t base) {
      const double s = sum_of(in, plan, base);
      if (op == ReduceOp::kSum) {
        o[oi] = convert<T>(s);
      } else if (op == ReduceOp::kMean) {
        o[oi] = convert<T>(s / n);
      } else {  // two passes: the mean, then the squared deviations
        const double m = s / n;
        double ss = 0;
        for_each_reduce_row(plan, base, [&](int64_t off, int64_t cnt, int64_t stride) {
          if (stride == 1 && cnt >= kMinSimd) {
            ss += HWY_DYNAMIC_DISPATCH(SumRowF)(dtype_of_v<T>, in + off, cnt, true, m);
            return;
          }
          for (int64_t i = 0; i < cnt; ++i) {
            const double d = to_acc(in[off + i * stride]) - m;
            ss += d * d;
          }
        });
        const double dof = n - static_cast<double>(correction);
        const double v = ss / (dof > 0 ? dof : 0.0);
        o[oi] = convert<T>(op == ReduceOp::kStd ? std::sqrt(v) : v);
      }
    });
    return;
  }
  DT_FAIL("[reduce_cpu] mean/var need a floating dtype, got %s", dtype_name(dtype_of_v<T>));
}

// True when v should replace best: NaN wins (and then stays), otherwise strictly better.
template <bool kMax, typename C>
DT_FORCE_INLINE bool better(C v, C best) {
  if (best != best) return false;
  if (v != v) return true;
  return kMax ? v > best : v < best;
}

// max/min (and their positions when `io` is set) of k outputs at once, reducing whole rows.
template <bool kMax, typename T>
void outer_max_min(T* vo, int64_t* io, const T* in, const ReducePlan& plan) {
  using C = compute_t<T>;
  const int64_t k = plan.kept_sizes.back();
  std::unique_ptr<C[]> best(new C[k]);  // not std::vector: C may be bool
  std::vector<int64_t> best_i(io ? static_cast<size_t>(k) : 0);
  for_each_reduce_output(outer_rows(plan), [&](int64_t r, int64_t base) {
    for (int64_t j = 0; j < k; ++j) best[j] = static_cast<C>(in[base + j]);
    if (io) std::fill(best_i.begin(), best_i.end(), 0);
    int64_t idx = 0;
    for_each_reduce_row(plan, base, [&](int64_t off, int64_t n, int64_t stride) {
      for (int64_t i = 0; i < n; ++i, ++idx) {
        const T* p = in + off + i * stride;
        for (int64_t j = 0; j < k; ++j) {
          const C v = static_cast<C>(p[j]);
          if (better<kMax>(v, best[j])) {
            best[j] = v;
            if (io) best_i[j] = idx;
          }
        }
      }
    });
    for (int64_t j = 0; j < k; ++j) {
      if (vo) vo[r * k + j] = convert<T>(best[j]);
      if (io) io[r * k + j] = best_i[j];
    }
  });
}

template <bool kMax, typename T>
void max_min(const Tensor& out, const T* in, const ReducePlan& plan) {
  using C = compute_t<T>;
  T* o = out.data<T>();
  if (use_outer_reduction(plan)) return outer_max_min<kMax, T>(o, nullptr, in, plan);
  for_each_reduce_output(plan, [&](int64_t oi, int64_t base) {
    C best = static_cast<C>(in[base]);
    for_each_reduce_row(plan, base, [&](int64_t off, int64_t n, int64_t stride) {
      if constexpr (is_float_v<T>) {
        if (stride == 1 && n >= kMinSimd) {
          const C v =
              static_cast<C>(HWY_DYNAMIC_DISPATCH(MaxMinRowF)(dtype_of_v<T>, in + off, n, kMax));
          if (better<kMax>(v, best)) best = v;
          return;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        const C v = static_cast<C>(in[off + i * stride]);
        if (better<kMax>(v, best)) best = v;
      }
    });
    o[oi] = convert<T>(best);
  });
}

template <bool kMax, typename T>
void arg_max_min(const Tensor& values, const Tensor& indices, const T* in, const ReducePlan& plan) {
  using C = compute_t<T>;
  T* vo = values.defined() ? values.data<T>() : nullptr;
  int64_t* io = indices.data<int64_t>();
  if (use_outer_reduction(plan)) return outer_max_min<kMax, T>(vo, io, in, plan);
  for_each_reduce_output(plan, [&](int64_t oi, int64_t base) {
    C best = static_cast<C>(in[base]);
    int64_t best_i = 0;
    int64_t idx = 0;
    for_each_reduce_row(plan, base, [&](int64_t off, int64_t n, int64_t stride) {
      for (int64_t i = 0; i < n; ++i, ++idx) {
        const C v = static_cast<C>(in[off + i * stride]);
        if (better<kMax>(v, best)) {
          best = v;
          best_i = idx;
        }
      }
    });
    io[oi] = best_i;
    if (vo) vo[oi] = convert<T>(best);
  });
}

}  // namespace

void reduce_cpu(ReduceOp op, const Tensor& out, const Tensor& in, const ReducePlan& plan,
                int64_t correction) {
  dispatch_dtype(in.dtype(), [&]<typename T>() {
    const T* p = static_cast<const T*>(in.data_ptr());
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
      case ReduceOp::kVar:
      case ReduceOp::kStd:
        return sum_mean_var<T>(op, out, p, plan, correction);
      case ReduceOp::kMax:
        return max_min<true, T>(out, p, plan);
      case ReduceOp::kMin:
        return max_min<false, T>(out, p, plan);
    }
  });
}

void arg_reduce_cpu(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in,
                    const ReducePlan& plan) {
  dispatch_dtype(in.dtype(), [&]<typename T>() {
    const T* p = static_cast<const T*>(in.data_ptr());
    if (is_max) {
      arg_max_min<true, T>(values, indices, p, plan);
    } else {
      arg_max_min<false, T>(values, indices, p, plan);
    }
  });
}

}  // namespace dtensor::detail
#endif  // HWY_ONCE
