// The scan family's Tensor ops (cumsum, cumprod, cummax, cummin, sort, argsort, topk, kthvalue,
// prod): each moves its dim last, runs the rows (scan_cpu.cc, scan_cuda.cu), and moves it back.
#include "dtensor/ops/scan/scan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "dtensor/ops/common/detail/cumprod_backward.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/scan/detail/scan_kernels.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace {

// x with `dim` (normalised) swapped to the last place, as contiguous [rows, n] rows; from_rows
// turns a result of the same row layout (any dtype) back into x's layout.
struct Rows {
  Tensor rows;
  Shape swapped;  // x's shape with dim and the last dim swapped
  int64_t dim = 0, last = 0;

  Rows(const Tensor& x, int64_t d) : dim(d), last(x.dim() - 1) {
    const Tensor t = x.transpose(dim, last).contiguous();
    swapped = Shape(t.sizes().begin(), t.sizes().end());
    int64_t outer = 1;  // the other dims' elements: rows even when n is 0
    for (int64_t d = 0; d < last; ++d) outer *= t.size(d);
    rows = t.reshape({outer, t.size(last)});
  }
  // A fresh [rows, n] tensor of `dtype` (n = width), on x's device.
  Tensor alloc(DType dtype, int64_t width) const {
    return empty({rows.size(0), width}, TensorOptions(dtype, rows.device()));
  }
  Tensor from_rows(const Tensor& r) const {
    Shape s = swapped;
    s[last] = r.size(1);
    return r.reshape(s).transpose(dim, last).contiguous();
  }
};

// Checks the input and normalises dim; 0-d inputs act as 1-element vectors.
int64_t check_along(const Tensor& x, int64_t dim, const char* op) {
  DT_CHECK(x.defined(), "[%s] argument self is an undefined tensor", op);
  return normalize_dim(dim, std::max<int64_t>(x.dim(), 1), op);
}

Tensor scan(const Tensor& x, int64_t dim, detail::ScanOp op, const char* name) {
  const int64_t d = check_along(x, dim, name);
  const DType out_dtype = is_floating(x.dtype()) ? x.dtype() : kInt64;
  if (x.dim() == 0) return scan(x.reshape({1}), 0, op, name).reshape({});
  const Rows r(x, d);
  Tensor out = r.alloc(out_dtype, r.rows.size(1));
  detail::scan_rows(op, r.rows, out);
  return r.from_rows(out);
}

}  // namespace

namespace detail {

DType scan_acc_dtype(DType dtype) {
  return is_floating(dtype) ? kFloat64 : kInt64;
}

namespace {
// `init` (x's shape with dim of size 1, the accumulator dtype) as [rows] starting accumulators
// in Rows(x, d)'s row order, on x's device; undefined stays undefined (the identity).
Tensor row_starts(const Tensor& x, int64_t d, const Tensor& init, const char* op) {
  if (!init.defined()) return Tensor();
  Shape init_shape(x.sizes().begin(), x.sizes().end());
  init_shape[d] = 1;
  DT_CHECK(init.sizes() == init_shape && init.dtype() == scan_acc_dtype(x.dtype()),
           "[%s] init has shape %s %s, expected %s %s", op, shape_str(init.sizes()),
           dtype_name(init.dtype()), shape_str(init_shape), dtype_name(scan_acc_dtype(x.dtype())));
  return Rows(init.to(x.device()), d).rows.reshape({-1}).contiguous();
}
}  // namespace

Tensor scan_totals(ScanOp op, const Tensor& x, int64_t dim, const Tensor& init) {
  const int64_t d = check_along(x, dim, "scan_totals");
  DT_CHECK(x.dim() > 0, "[scan_totals] expected a tensor with at least one dim");
  // Widening to the accumulator dtype is exact and scan_row widens each element the same way,
  // so each row's result is the scan's own accumulator after the row's last element (bit for
  // bit, the same order of operations): `init` for an empty row.
  const Rows r(x.to(scan_acc_dtype(x.dtype())), d);
  const Tensor start = row_starts(x, d, init, "scan_totals");
  Tensor out = r.alloc(scan_acc_dtype(x.dtype()), 1);
  scan_rows(op, r.rows, out, /*total_only=*/true, start);
  return r.from_rows(out);
}

Tensor scan_from(ScanOp op, const Tensor& x, int64_t dim, const Tensor& init) {
  const int64_t d = check_along(x, dim, "scan_from");
  DT_CHECK(x.dim() > 0, "[scan_from] expected a tensor with at least one dim");
  DT_CHECK(init.defined(), "[scan_from] argument init is an undefined tensor");
  const Rows r(x, d);
  const Tensor start = row_starts(x, d, init, "scan_from");
  Tensor out = r.alloc(is_floating(x.dtype()) ? x.dtype() : kInt64, r.rows.size(1));
  scan_rows(op, r.rows, out, /*total_only=*/false, start);
  return r.from_rows(out);
}

}  // namespace detail

Tensor cumsum(const Tensor& x, int64_t dim) {
  return scan(x, dim, detail::ScanOp::kSum, "cumsum");
}

Tensor cumprod(const Tensor& x, int64_t dim) {
  return scan(x, dim, detail::ScanOp::kProd, "cumprod");
}

Tensor logcumsumexp(const Tensor& x, int64_t dim) {
  detail::check_floating_input("logcumsumexp", x);  // as PyTorch
  return scan(x, dim, detail::ScanOp::kLogSumExp, "logcumsumexp");
}

Tensor prod(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = check_along(x, dim, "prod");
  const DType out_dtype = is_floating(x.dtype()) ? x.dtype() : kInt64;
  if (x.dim() == 0) return prod(x.reshape({1}), 0, false).reshape({});
  const Rows r(x, d);
  Tensor out = r.alloc(out_dtype, 1);
  detail::scan_rows(detail::ScanOp::kProd, r.rows, out, /*total_only=*/true);
  Tensor result = r.from_rows(out);  // dim of size 1
  return keepdim ? result : result.squeeze(d);
}

Tensor prod(const Tensor& x) {
  DT_CHECK(x.defined(), "[prod] argument self is an undefined tensor");
  return prod(x.reshape({x.numel()}), 0, false);
}

namespace {
// (values, indices) of x's shape along dim from a row kernel (in, values, indices); 0-d inputs
// act as 1-element vectors.
template <typename RowsFn>
ValuesIndices values_indices_along(const Tensor& x, int64_t dim, const char* op, RowsFn rows) {
  const int64_t d = check_along(x, dim, op);
  if (x.dim() == 0) {
    const ValuesIndices v = values_indices_along(x.reshape({1}), 0, op, rows);
    return {v.values.reshape({}), v.indices.reshape({})};
  }
  const Rows r(x, d);
  Tensor values = r.alloc(x.dtype(), r.rows.size(1));
  Tensor indices = r.alloc(kInt64, r.rows.size(1));
  rows(r.rows, values, indices);
  return {r.from_rows(values), r.from_rows(indices)};
}

ValuesIndices cumextreme(const Tensor& x, int64_t dim, bool is_max) {
  return values_indices_along(x, dim, is_max ? "cummax" : "cummin",
                              [is_max](const Tensor& in, const Tensor& v, const Tensor& i) {
                                detail::cumextreme_rows(is_max, in, v, i);
                              });
}
}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending) {
  return values_indices_along(x, dim, "sort",
                              [descending](const Tensor& in, const Tensor& v, const Tensor& i) {
                                detail::sort_rows(in, descending, v, i);
                              });
}

ValuesIndices cummax(const Tensor& x, int64_t dim) {
  return cumextreme(x, dim, true);
}

ValuesIndices cummin(const Tensor& x, int64_t dim) {
  return cumextreme(x, dim, false);
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return sort(x, dim, descending).indices;
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  const int64_t d = check_along(x, dim, "topk");
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  DT_CHECK(k >= 0 && k <= n,
           "[topk] k %d out of range for dim %d of size %d (expected 0 <= k <= %d)", k, d, n, n);
  DT_CHECK(x.dim() > 0 || k == 1, "[topk] k %d for a 0-d input (expected k = 1)", k);
  const ValuesIndices s = sort(x, dim, largest);
  if (x.dim() == 0) return s;
  return {s.values.narrow(d, 0, k).contiguous(), s.indices.narrow(d, 0, k).contiguous()};
}

ValuesIndices kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  const int64_t d = check_along(x, dim, "kthvalue");
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  DT_CHECK(k >= 1 && k <= n,
           "[kthvalue] k %d out of range for dim %d of size %d (expected 1 <= k <= %d)", k, d, n,
           n);
  const ValuesIndices s = sort(x, dim, /*descending=*/false);
  if (x.dim() == 0) return s;
  Tensor v = s.values.narrow(d, k - 1, 1), i = s.indices.narrow(d, k - 1, 1);
  if (!keepdim) {
    v = v.squeeze(d);
    i = i.squeeze(d);
  }
  return {v.contiguous(), i.contiguous()};
}

namespace {
// median / mode along dim: each row sorted stably, then pick_row (dim of size 1, or removed).
ValuesIndices pick_along(const Tensor& x, int64_t dim, bool keepdim, detail::PickOp op,
                         const char* name) {
  const int64_t d = check_along(x, dim, name);
  if (x.dim() == 0) return pick_along(x.reshape({1}), 0, false, op, name);
  DT_CHECK(x.size(d) > 0,
           "[%s] cannot compute the %s of dim %d of size 0 (input of shape %s): it has no "
           "elements",
           name, name, d, shape_str(x.sizes()));
  // The CPU median needs no sort (nth_element in the same order); the rest sort, then pick.
  const Rows rx(x, d);
  Tensor values = rx.alloc(x.dtype(), 1), indices = rx.alloc(kInt64, 1);
  if (op == detail::PickOp::kMedian && !x.device().is_cuda()) {
    detail::median_rows_cpu(rx.rows, values, indices);
  } else {
    const ValuesIndices s = sort(x, d, /*descending=*/false);
    detail::pick_rows(op, Rows(s.values, d).rows, Rows(s.indices, d).rows, values, indices);
  }
  Tensor v = rx.from_rows(values), i = rx.from_rows(indices);
  if (!keepdim) {
    v = v.squeeze(d);
    i = i.squeeze(d);
  }
  return {v, i};
}
}  // namespace

Tensor median(const Tensor& x) {
  DT_CHECK(x.defined(), "[median] argument self is an undefined tensor");
  if (x.numel() == 0) {  // PyTorch: NaN (floating) for an empty input
    return full({}, Scalar(std::nan("")), TensorOptions(x.dtype(), x.device()));
  }
  return pick_along(x.reshape({x.numel()}), 0, false, detail::PickOp::kMedian, "median").values;
}

ValuesIndices median(const Tensor& x, int64_t dim, bool keepdim) {
  return pick_along(x, dim, keepdim, detail::PickOp::kMedian, "median");
}

ValuesIndices mode(const Tensor& x, int64_t dim, bool keepdim) {
  return pick_along(x, dim, keepdim, detail::PickOp::kMode, "mode");
}

namespace detail {

Tensor cumprod_backward(const Tensor& grad, const Tensor& x, int64_t dim) {
  const int64_t d = check_along(x, dim, "cumprod_backward");
  DT_CHECK(grad.defined() && grad.sizes() == x.sizes() && grad.dtype() == x.dtype(),
           "[cumprod_backward] grad must have the input's shape %s and dtype %s",
           shape_str(x.sizes()), dtype_name(x.dtype()));
  if (x.dim() == 0) return cumprod_backward(grad.reshape({1}), x.reshape({1}), 0).reshape({});
  const Rows rx(x, d), rg(grad, d);
  Tensor out = rx.alloc(x.dtype(), rx.rows.size(1));
  cumprod_backward_rows(rg.rows, rx.rows, out);
  return rx.from_rows(out);
}

}  // namespace detail
}  // namespace dtensor
