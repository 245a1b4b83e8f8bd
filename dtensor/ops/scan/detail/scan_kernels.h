// The row algorithms of the scan family, written once for the CPU loops (scan_cpu.cc) and the
// CUDA kernels (scan_cuda.cu, one thread per row): a row is `n` contiguous elements along the
// op's dim. Host and device run the same code, so their results are bit-identical.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/macros.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// kLogSumExp: log(exp(acc) + exp(x)) (logcumsumexp; floating inputs only).
enum class ScanOp : uint8_t { kSum, kProd, kLogSumExp };

// log(exp(acc) + exp(x)), PyTorch's CPU helper (ATen's log_add_exp_helper): a NaN x propagates,
// and equal infinities (-inf + -inf, inf + inf) give acc itself instead of NaN.
DT_HOST_DEVICE inline double log_add_exp(double acc, double x) {
  const bool x_nan = x != x;
  const double lo = x_nan ? x : (x < acc ? x : acc);
  const double hi = x_nan ? x : (acc < x ? x : acc);
  if (lo != hi || lo - lo == 0.0) return ::log1p(::exp(lo - hi)) + hi;
  return acc;
}

// A scan's accumulator: float64 for the floating types (as PyTorch's CPU cumsum), uint64 for
// integers and bool (int64 results wrap on overflow as PyTorch's do, without signed overflow).
template <typename T>
using scan_acc_t = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, uint64_t>;

// out[i * out_step] = init op in[0] op in[1] op ... op in[i]; O is T for floating T, int64
// otherwise. out_step 0 keeps only the total (the reduction: out[0], init for n == 0). `init`
// (nullptr: the identity) starts the accumulator: a block of a dim sharded over ranks starts
// from the accumulator the previous block ended with, so the sequence of operations (and every
// rounding) is exactly the single-device scan's.
template <typename T, typename O>
DT_HOST_DEVICE void scan_row(ScanOp op, const T* in, O* out, int64_t n, int64_t out_step,
                             const scan_acc_t<T>* init = nullptr) {
  using A = scan_acc_t<T>;
  A acc = init != nullptr ? *init : (op == ScanOp::kProd ? A(1) : A(0));
  if constexpr (std::is_floating_point_v<A>) {
    if (init == nullptr && op == ScanOp::kLogSumExp) acc = -HUGE_VAL;
  }
  const auto store = [](A a) -> O {
    if constexpr (std::is_floating_point_v<A>) {
      return convert<O>(a);
    } else {
      return static_cast<O>(static_cast<int64_t>(a));
    }
  };
  if (out_step == 0) out[0] = store(acc);
  for (int64_t i = 0; i < n; ++i) {
    A v;
    if constexpr (std::is_floating_point_v<A>) {
      v = static_cast<A>(static_cast<compute_t<T>>(in[i]));
    } else {
      v = static_cast<A>(static_cast<int64_t>(in[i]));
    }
    if constexpr (std::is_floating_point_v<A>) {
      if (op == ScanOp::kLogSumExp) {
        acc = log_add_exp(acc, v);
        out[i * out_step] = store(acc);
        continue;
      }
    }
    acc = op == ScanOp::kSum ? acc + v : acc * v;
    out[i * out_step] = store(acc);
  }
}

// Whether a sorts strictly before b. NaN counts as larger than every number (last when
// ascending, first when descending) and NaNs as equal, as in PyTorch; a strict weak order, so a
// stable sort's result is unique and every device produces the same indices.
template <typename C>
DT_HOST_DEVICE bool sorts_before(C a, C b, bool descending) {
  if constexpr (std::is_floating_point_v<C>) {
    const bool a_nan = a != a, b_nan = b != b;
    if (a_nan || b_nan) return descending ? (a_nan && !b_nan) : (!a_nan && b_nan);
  }
  return descending ? b < a : a < b;
}

// Running max (or min) of a row and the index it came from (torch.cummax / cummin): an equal
// later element takes over the index (>= / <=) and NaN, once seen, is the extreme from there
// on (each later NaN taking over too), as PyTorch's kernel does.
template <typename T>
DT_HOST_DEVICE void cumextreme_row(bool is_max, const T* in, T* values, int64_t* indices,
                                   int64_t n) {
  using C = compute_t<T>;
  C best{};
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    const C v = static_cast<C>(in[i]);
    bool take = i == 0;
    if (!take) {
      const bool beats = is_max ? v >= best : v <= best;
      if constexpr (std::is_floating_point_v<C>) {
        take = v != v || (best == best && beats);
      } else {
        take = beats;
      }
    }
    if (take) {
      best = v;
      at = i;
    }
    values[i] = in[at];
    indices[i] = at;
  }
}

// The gradient of a cumprod row: out[i] = prefix(i) * t(i), prefix(i) = x[0] * .. * x[i-1] and
// t(i) = sum over j >= i of g[j] * x[i+1] * .. * x[j] = g[i] + x[i+1] * t(i+1), so no division
// (exact where x has zeros). A zero element ends the products it is in unless one of their
// factors is an inf or a NaN (then 0 * inf = NaN, as exact arithmetic says): a partial product of
// finite elements that overflowed does not survive it (the row [0, -0, 1e300, -1e300] gave NaN at
// x[0], whose gradient is g[0]: 1e300 * -1e300 overflowed before the -0 could end it). `t` is
// scratch for n doubles.
template <typename T>
DT_HOST_DEVICE void cumprod_backward_row(const T* g, const T* x, T* out, double* t, int64_t n) {
  using C = compute_t<T>;
  const auto at = [x](int64_t i) { return static_cast<double>(static_cast<C>(x[i])); };
  const auto finite = [](double v) { return v - v == 0.0; };
  double acc = 0;
  int64_t wild = 0;  // inf / NaN elements among x[i+2..n-1] (the factors of t(i+1))
  for (int64_t i = n - 1; i >= 0; --i) {
    const double next = i + 1 < n ? at(i + 1) : 0.0;
    acc = (next == 0 && wild == 0 ? 0.0 : acc * next) + static_cast<double>(static_cast<C>(g[i]));
    t[i] = acc;
    if (i + 1 < n && !finite(next)) ++wild;
  }
  if (n > 0 && !finite(at(0))) ++wild;  // now every inf / NaN of the row
  double prefix = 1;
  int64_t wild_before = 0;  // inf / NaN elements among x[0..i-1]
  for (int64_t i = 0; i < n; ++i) {
    const double xi = at(i);
    const bool wild_after = wild - wild_before - (finite(xi) ? 0 : 1) > 0;
    out[i] = convert<T>(prefix == 0 && !wild_after ? 0.0 : prefix * t[i]);
    if (!finite(xi)) ++wild_before;
    prefix = xi == 0 && wild_before == 0 ? 0.0 : prefix * xi;
  }
}

// median / mode along a dim, picked from a row sorted stably ascending (`sv` values, NaN last;
// `si` their original positions). kMedian: PyTorch's lower median, the element of rank
// (n - 1) / 2 in the (value, index) order (ATen sorts with the index as tie-break, so among
// equal values the index is that rank's), or the first NaN when the row holds one. kMode: the
// most frequent value (runs of == values, so NaNs count once each), the smallest on a tie, with
// the largest index it occurs at (PyTorch 2.15's CPU choice). n >= 1.
enum class PickOp : uint8_t { kMedian, kMode };

template <typename T>
DT_HOST_DEVICE void pick_row(PickOp op, const T* sv, const int64_t* si, int64_t n, T* value,
                             int64_t* index) {
  using C = compute_t<T>;
  int64_t pos = 0;
  if (op == PickOp::kMedian) {
    pos = (n - 1) / 2;
    const C last = static_cast<C>(sv[n - 1]);
    if (last != last) {  // a NaN: the first one (NaNs sort last, in index order)
      pos = n - 1;
      while (pos > 0 && static_cast<C>(sv[pos - 1]) != static_cast<C>(sv[pos - 1])) --pos;
    }
    *value = sv[pos];
    *index = si[pos];
    return;
  }
  int64_t best_count = 0, best_index = 0;
  for (int64_t start = 0; start < n;) {
    int64_t end = start + 1, top = si[start];
    while (end < n && static_cast<C>(sv[end]) == static_cast<C>(sv[start])) {
      top = si[end] > top ? si[end] : top;
      ++end;
    }
    if (end - start > best_count) {
      best_count = end - start;
      pos = start;
      best_index = top;
    }
    start = end;
  }
  *value = sv[pos];
  *index = best_index;
}

// Row kernels on contiguous [rows, n] tensors (CPU here, CUDA in scan_cuda.cu; the CPU
// functions dispatch to CUDA for CUDA tensors).
// out (int64 for integer and bool inputs, else in's dtype) = the scan of each row: [rows, n],
// or with `total_only` [rows, 1], the last element (the row's sum / product). `init`, when
// defined, is each row's starting accumulator: contiguous [rows] on in's device, float64 for
// floating inputs and int64 (the bits of the wrapping uint64 accumulator) otherwise.
void scan_rows(ScanOp op, const Tensor& in, const Tensor& out, bool total_only = false,
               const Tensor& init = Tensor());
// values (in's dtype) and indices (int64) of each row stably sorted.
void sort_rows(const Tensor& in, bool descending, const Tensor& values, const Tensor& indices);
// out = cumprod_backward_row of each row (g, x and out of one floating dtype).
void cumprod_backward_rows(const Tensor& g, const Tensor& x, const Tensor& out);
// values (in's dtype) and indices (int64) = cumextreme_row of each row.
void cumextreme_rows(bool is_max, const Tensor& in, const Tensor& values, const Tensor& indices);
// The median of each (unsorted) row on the CPU, the element pick_row(kMedian) gives after a
// stable sort, found by nth_element in the (value, index) order instead of sorting.
void median_rows_cpu(const Tensor& in, const Tensor& values, const Tensor& indices);
// values [rows, 1] and indices [rows, 1] = pick_row of each sorted row (sv, si: [rows, n], n >= 1).
void pick_rows(PickOp op, const Tensor& sv, const Tensor& si, const Tensor& values,
               const Tensor& indices);

// The block form of cumsum / cumprod (scan_cpu.cc, on x's device), for a dim sharded over
// ranks: the accumulator dtype (float64 for floating inputs, int64 — the bits of the wrapping
// uint64 accumulator — otherwise); each row's final accumulator along dim continuing from
// `init` (undefined: the identity), keepdim (x's shape with dim of size 1), which is bit for bit
// the accumulator the single-device scan holds after the row's last element when `init` is the
// one it held before the first (`init` itself for an empty block); and the scan along dim
// starting each row from `init` (the totals' shape and dtype).
DType scan_acc_dtype(DType dtype);
Tensor scan_totals(ScanOp op, const Tensor& x, int64_t dim, const Tensor& init = Tensor());
Tensor scan_from(ScanOp op, const Tensor& x, int64_t dim, const Tensor& init);

// The CUDA twins (scan_cuda.cu; scan_no_cuda.cc raises when CUDA is off).
void scan_rows_cuda(ScanOp op, const Tensor& in, const Tensor& out, bool total_only,
                    const Tensor& init);
void sort_rows_cuda(const Tensor& in, bool descending, const Tensor& values, const Tensor& indices);
void cumprod_backward_rows_cuda(const Tensor& g, const Tensor& x, const Tensor& out);
void cumextreme_rows_cuda(bool is_max, const Tensor& in, const Tensor& values,
                          const Tensor& indices);
void pick_rows_cuda(PickOp op, const Tensor& sv, const Tensor& si, const Tensor& values,
                    const Tensor& indices);

}  // namespace dtensor::detail
