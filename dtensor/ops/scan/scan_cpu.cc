// CPU row kernels of the scan family (the row algorithms are in detail/scan_kernels.h, shared
// with CUDA; rows of CUDA tensors go to the CUDA kernels). The Tensor ops are in scan.cc.
#include <algorithm>
#include <numeric>
#include <vector>

#include "dtensor/ops/scan/detail/scan_kernels.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace detail {

void scan_rows(ScanOp op, const Tensor& in, const Tensor& out, bool total_only,
               const Tensor& init) {
  if (in.device().is_cuda()) return scan_rows_cuda(op, in, out, total_only, init);
  const int64_t rows = in.size(0), n = in.size(1);
  const int64_t out_row = total_only ? 1 : n;
  dispatch_dtype(in.dtype(), [&]<typename T>() {
    using O = std::conditional_t<std::is_floating_point_v<compute_t<T>>, T, int64_t>;
    const T* src = in.data<T>();
    O* dst = out.data<O>();
    const auto* start =
        init.defined() ? static_cast<const scan_acc_t<T>*>(init.data_ptr()) : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      scan_row(op, src + r * n, dst + r * out_row, n, total_only ? 0 : 1,
               start != nullptr ? start + r : nullptr);
    }
  });
}

void sort_rows(const Tensor& in, bool descending, const Tensor& values, const Tensor& indices) {
  if (in.device().is_cuda()) return sort_rows_cuda(in, descending, values, indices);
  const int64_t n = in.dim() == 2 ? in.size(1) : 0;
  const int64_t rows = n > 0 ? in.numel() / n : 0;
  dispatch_dtype(in.dtype(), [&]<typename T>() {
    using C = compute_t<T>;
    const T* src = in.data<T>();
    T* vals = values.data<T>();
    int64_t* idx = indices.data<int64_t>();
    std::vector<C> keys(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = src + r * n;
      for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<C>(row[i]);
      int64_t* out_idx = idx + r * n;
      std::iota(out_idx, out_idx + n, int64_t{0});
      std::stable_sort(out_idx, out_idx + n, [&](int64_t a, int64_t b) {
        return sorts_before(keys[a], keys[b], descending);
      });
      for (int64_t i = 0; i < n; ++i) vals[r * n + i] = row[out_idx[i]];
    }
  });
}

void cumprod_backward_rows(const Tensor& g, const Tensor& x, const Tensor& out) {
  if (x.device().is_cuda()) return cumprod_backward_rows_cuda(g, x, out);
  const int64_t n = x.dim() == 2 ? x.size(1) : 0;
  const int64_t rows = n > 0 ? x.numel() / n : 0;
  dispatch_floating(x.dtype(), "cumprod_backward", [&]<typename T>() {
    std::vector<double> t(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      cumprod_backward_row(g.data<T>() + r * n, x.data<T>() + r * n, out.data<T>() + r * n,
                           t.data(), n);
    }
  });
}

void cumextreme_rows(bool is_max, const Tensor& in, const Tensor& values, const Tensor& indices) {
  if (in.device().is_cuda()) return cumextreme_rows_cuda(is_max, in, values, indices);
  const int64_t rows = in.size(0), n = in.size(1);
  dispatch_dtype(in.dtype(), [&]<typename T>() {
    for (int64_t r = 0; r < rows; ++r) {
      cumextreme_row(is_max, in.data<T>() + r * n, values.data<T>() + r * n,
                     indices.data<int64_t>() + r * n, n);
    }
  });
}

void median_rows_cpu(const Tensor& in, const Tensor& values, const Tensor& indices) {
  const int64_t rows = in.size(0), n = in.size(1);
  dispatch_dtype(in.dtype(), [&]<typename T>() {
    using C = compute_t<T>;
    std::vector<C> keys(static_cast<size_t>(n));
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = in.data<T>() + r * n;
      int64_t pick = -1;
      for (int64_t i = 0; i < n; ++i) {
        keys[i] = static_cast<C>(row[i]);
        if (pick < 0 && keys[i] != keys[i]) pick = i;  // the first NaN
      }
      if (pick < 0) {
        std::iota(idx.begin(), idx.end(), int64_t{0});
        const auto kth = idx.begin() + (n - 1) / 2;
        std::nth_element(idx.begin(), kth, idx.end(), [&](int64_t a, int64_t b) {
          return keys[a] < keys[b] || (keys[a] == keys[b] && a < b);
        });
        pick = *kth;
      }
      values.data<T>()[r] = row[pick];
      indices.data<int64_t>()[r] = pick;
    }
  });
}

void pick_rows(PickOp op, const Tensor& sv, const Tensor& si, const Tensor& values,
               const Tensor& indices) {
  if (sv.device().is_cuda()) return pick_rows_cuda(op, sv, si, values, indices);
  const int64_t rows = sv.size(0), n = sv.size(1);
  dispatch_dtype(sv.dtype(), [&]<typename T>() {
    for (int64_t r = 0; r < rows; ++r) {
      pick_row(op, sv.data<T>() + r * n, si.data<int64_t>() + r * n, n, values.data<T>() + r,
               indices.data<int64_t>() + r);
    }
  });
}

}  // namespace detail

}  // namespace dtensor
