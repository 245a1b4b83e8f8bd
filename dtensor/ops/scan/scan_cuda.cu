// CUDA row kernels of the scan family: one thread per row, running the row algorithms of
// scan_kernels.h (the CPU's own code, so the results are bit-identical). Sorting is a stable
// bottom-up merge sort in global scratch memory; its order is the CPU std::stable_sort's,
// since a stable sort's result under a strict weak order is unique. Simple rather than fast:
// a row is sequential work for one thread.
#include <cstdint>

#include "dtensor/ops/scan/detail/scan_kernels.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {
namespace {

constexpr int kBlock = 128;

struct RowGeom {
  int64_t rows, n;
};

RowGeom geom(const Tensor& t) {
  const int64_t n = t.dim() == 2 ? t.size(1) : 0;
  return {n > 0 ? t.numel() / n : 0, n};
}

// total_only: out is [rows, 1], the row's total.
// init: each row's starting accumulator, or nullptr (the identity).
template <typename T, typename O>
__global__ void scan_kernel(ScanOp op, const T* in, O* out, RowGeom g, bool total_only,
                            const scan_acc_t<T>* init) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t out_row = total_only ? 1 : g.n;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < g.rows;
       r += step) {
    scan_row(op, in + r * g.n, out + r * out_row, g.n, total_only ? 0 : 1,
             init != nullptr ? init + r : nullptr);
  }
}

// Merges the sorted runs [lo, mid) and [mid, hi) of (sk, si) into (dk, di), stably.
template <typename C>
__device__ void merge_runs(const C* sk, const int64_t* si, C* dk, int64_t* di, int64_t lo,
                           int64_t mid, int64_t hi, bool descending) {
  int64_t a = lo, b = mid, o = lo;
  while (a < mid && b < hi) {
    if (sorts_before(sk[b], sk[a], descending)) {
      dk[o] = sk[b];
      di[o++] = si[b++];
    } else {
      dk[o] = sk[a];
      di[o++] = si[a++];
    }
  }
  for (; a < mid; ++a, ++o) {
    dk[o] = sk[a];
    di[o] = si[a];
  }
  for (; b < hi; ++b, ++o) {
    dk[o] = sk[b];
    di[o] = si[b];
  }
}

// keys / idx and keys2 / idx2: two [rows, n] scratch pairs; the sorted row is written to
// values (in the input's type) and indices.
template <typename T>
__global__ void sort_kernel(const T* in, T* values, int64_t* indices, compute_t<T>* keys,
                            int64_t* idx, compute_t<T>* keys2, int64_t* idx2, RowGeom g,
                            bool descending) {
  using C = compute_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < g.rows;
       r += step) {
    const int64_t base = r * g.n;
    C* k0 = keys + base;
    int64_t* i0 = idx + base;
    C* k1 = keys2 + base;
    int64_t* i1 = idx2 + base;
    for (int64_t i = 0; i < g.n; ++i) {
      k0[i] = static_cast<C>(in[base + i]);
      i0[i] = i;
    }
    for (int64_t w = 1; w < g.n; w *= 2) {
      for (int64_t lo = 0; lo < g.n; lo += 2 * w) {
        const int64_t mid = lo + w < g.n ? lo + w : g.n;
        const int64_t hi = lo + 2 * w < g.n ? lo + 2 * w : g.n;
        merge_runs(k0, i0, k1, i1, lo, mid, hi, descending);
      }
      C* tk = k0;
      k0 = k1;
      k1 = tk;
      int64_t* ti = i0;
      i0 = i1;
      i1 = ti;
    }
    for (int64_t i = 0; i < g.n; ++i) {
      indices[base + i] = i0[i];
      values[base + i] = in[base + i0[i]];
    }
  }
}

template <typename T>
__global__ void cumprod_backward_kernel(const T* grad, const T* x, T* out, double* t, RowGeom g) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < g.rows;
       r += step) {
    cumprod_backward_row(grad + r * g.n, x + r * g.n, out + r * g.n, t + r * g.n, g.n);
  }
}

template <typename T>
__global__ void cumextreme_kernel(bool is_max, const T* in, T* values, int64_t* indices,
                                  RowGeom g) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < g.rows;
       r += step) {
    cumextreme_row(is_max, in + r * g.n, values + r * g.n, indices + r * g.n, g.n);
  }
}

template <typename T>
void launch_cumextreme(bool is_max, const Tensor& in, const Tensor& values, const Tensor& indices,
                       RowGeom g) {
  cumextreme_kernel<T><<<cuda::grid_for(g.rows, kBlock), kBlock, 0, cuda::current_stream()>>>(
      is_max, in.data<T>(), values.data<T>(), indices.data<int64_t>(), g);
}

template <typename T>
void launch_scan(ScanOp op, const Tensor& in, const Tensor& out, RowGeom g, bool total_only,
                 const Tensor& init) {
  using O = std::conditional_t<std::is_floating_point_v<compute_t<T>>, T, int64_t>;
  const auto* start = init.defined() ? static_cast<const scan_acc_t<T>*>(init.data_ptr()) : nullptr;
  scan_kernel<T, O><<<cuda::grid_for(g.rows, kBlock), kBlock, 0, cuda::current_stream()>>>(
      op, in.data<T>(), out.data<O>(), g, total_only, start);
}

template <typename T>
void launch_sort(const Tensor& in, bool descending, const Tensor& values, const Tensor& indices,
                 RowGeom g) {
  using C = compute_t<T>;
  const TensorOptions key_opts(dtype_of_v<C>, in.device()), idx_opts(kInt64, in.device());
  const Shape shape{g.rows, g.n};
  Tensor keys = empty(shape, key_opts), keys2 = empty(shape, key_opts);
  Tensor idx = empty(shape, idx_opts), idx2 = empty(shape, idx_opts);
  sort_kernel<T><<<cuda::grid_for(g.rows, kBlock), kBlock, 0, cuda::current_stream()>>>(
      in.data<T>(), values.data<T>(), indices.data<int64_t>(), keys.data<C>(), idx.data<int64_t>(),
      keys2.data<C>(), idx2.data<int64_t>(), g, descending);
}

template <typename T>
void launch_cumprod_backward(const Tensor& grad, const Tensor& x, const Tensor& out, RowGeom g) {
  Tensor t = empty({g.rows, g.n}, TensorOptions(kFloat64, x.device()));
  cumprod_backward_kernel<T><<<cuda::grid_for(g.rows, kBlock), kBlock, 0, cuda::current_stream()>>>(
      grad.data<T>(), x.data<T>(), out.data<T>(), t.data<double>(), g);
}

// values / indices [rows, 1]: pick_row of each sorted row.
template <typename T>
__global__ void pick_kernel(PickOp op, const T* sv, const int64_t* si, T* values, int64_t* indices,
                            RowGeom g) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < g.rows;
       r += step) {
    pick_row(op, sv + r * g.n, si + r * g.n, g.n, values + r, indices + r);
  }
}

}  // namespace

void pick_rows_cuda(PickOp op, const Tensor& sv, const Tensor& si, const Tensor& values,
                    const Tensor& indices) {
  const RowGeom g = geom(sv);
  if (g.rows == 0) return;
  cuda::DeviceGuard guard(sv.device().index);
  dispatch_dtype(sv.dtype(), [&]<typename T>() {
    pick_kernel<T><<<cuda::grid_for(g.rows, kBlock), kBlock, 0, cuda::current_stream()>>>(
        op, sv.data<T>(), si.data<int64_t>(), values.data<T>(), indices.data<int64_t>(), g);
  });
}

void scan_rows_cuda(ScanOp op, const Tensor& in, const Tensor& out, bool total_only,
                    const Tensor& init) {
  const RowGeom g{in.size(0), in.size(1)};
  if (g.rows == 0) return;
  cuda::DeviceGuard guard(in.device().index);
  dispatch_dtype(in.dtype(),
                 [&]<typename T>() { launch_scan<T>(op, in, out, g, total_only, init); });
}

void sort_rows_cuda(const Tensor& in, bool descending, const Tensor& values,
                    const Tensor& indices) {
  const RowGeom g = geom(in);
  if (g.rows == 0) return;
  cuda::DeviceGuard guard(in.device().index);
  dispatch_dtype(in.dtype(),
                 [&]<typename T>() { launch_sort<T>(in, descending, values, indices, g); });
}

void cumextreme_rows_cuda(bool is_max, const Tensor& in, const Tensor& values,
                          const Tensor& indices) {
  const RowGeom g{in.size(0), in.size(1)};
  if (g.rows == 0) return;
  cuda::DeviceGuard guard(in.device().index);
  dispatch_dtype(in.dtype(),
                 [&]<typename T>() { launch_cumextreme<T>(is_max, in, values, indices, g); });
}

void cumprod_backward_rows_cuda(const Tensor& grad, const Tensor& x, const Tensor& out) {
  const RowGeom g = geom(x);
  if (g.rows == 0) return;
  cuda::DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "cumprod_backward",
                    [&]<typename T>() { launch_cumprod_backward<T>(grad, x, out, g); });
}

}  // namespace dtensor::detail
