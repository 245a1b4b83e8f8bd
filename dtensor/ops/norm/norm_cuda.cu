// CUDA layer_norm / rms_norm and their backward: one block per row of n elements. Forward: two
// reductions (mean, then the centred sum of squares) and a write pass, as norm_cpu.cc, and the
// row's statistics when asked. Backward: one block per row for grad_x (two reductions, a write
// pass), and one thread per column summing the weight / bias gradients over the rows. Row passes
// read and write 16 bytes at a time where the rows are aligned.
#include <limits>
#include <type_traits>

#include "dtensor/ops/common/detail/block_reduce_cuda.cuh"
#include "dtensor/ops/norm/detail/norm_cuda.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {

namespace {

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<compute_t<T>, float>, float, double>;

// With kVec, the row's elements in 16-byte groups (rows aligned, n a multiple of the group).
template <typename T, bool kVec>
__global__ void norm_kernel(const T* x, const T* w, const T* b, T* y, acc_t<T>* mean_out,
                            acc_t<T>* rstd_out, int64_t rows, int64_t n, double eps, bool rms) {
  using A = acc_t<T>;
  A* shm = block_scratch<A>();
  const auto ld = [](T v) { return static_cast<A>(static_cast<compute_t<T>>(v)); };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    A mean = 0;
    if (!rms) {
      row_for_each<kVec>(xr, n, [&](int64_t, T v) { mean += ld(v); });
      mean = block_reduce_all(mean, shm, BlockSum{}) / static_cast<A>(n);
    }
    A sq = 0;
    row_for_each<kVec>(xr, n, [&](int64_t, T v) {
      const A c = ld(v) - mean;
      sq += c * c;
    });
    sq = block_reduce_all(sq, shm, BlockSum{});
    const A inv = A(1) / sqrt(sq / static_cast<A>(n) + static_cast<A>(eps));
    if (threadIdx.x == 0) {
      if (mean_out != nullptr) mean_out[r] = mean;
      if (rstd_out != nullptr) rstd_out[r] = inv;
    }
    row_map<kVec>(xr, y + r * n, n, [&](int64_t i, T xv) {
      A v = (ld(xv) - mean) * inv;
      if (w != nullptr) v *= ld(w[i]);
      if (b != nullptr) v += ld(b[i]);
      return convert<T>(static_cast<compute_t<T>>(v));
    });
  }
}

// grad_x of one row per block (see norm.h): two block reductions (sum of gw, of gw * xhat),
// then the write; 16-byte groups with kVec.
template <typename T, bool kVec>
__global__ void norm_backward_kernel(const T* g, const T* x, const T* w, const acc_t<T>* mean,
                                     const acc_t<T>* rstd, T* gx, int64_t rows, int64_t n,
                                     bool rms) {
  using A = acc_t<T>;
  A* shm = block_scratch<A>();
  const auto ld = [](T v) { return static_cast<A>(static_cast<compute_t<T>>(v)); };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = g + r * n;
    const T* xr = x + r * n;
    const A m = rms ? A(0) : mean[r], rs = rstd[r];
    A sg = 0, sgx = 0;
    row_for_each<kVec>(gr, xr, n, [&](int64_t i, T gv, T xv) {
      const A gw = ld(gv) * (w != nullptr ? ld(w[i]) : A(1));
      sg += gw;
      sgx += gw * (ld(xv) - m) * rs;
    });
    sg = rms ? A(0) : block_reduce_all(sg, shm, BlockSum{}) / static_cast<A>(n);
    sgx = block_reduce_all(sgx, shm, BlockSum{}) / static_cast<A>(n);
    row_map<kVec>(gr, xr, gx + r * n, n, [&](int64_t i, T gv, T xv) {
      const A gw = ld(gv) * (w != nullptr ? ld(w[i]) : A(1));
      const A xhat = (ld(xv) - m) * rs;
      return convert<T>(static_cast<compute_t<T>>(rs * (gw - sg - xhat * sgx)));
    });
  }
}

// dw[j] += sum_r g[r, j] * xhat[r, j], db[j] += sum_r g[r, j]: one thread per column j, the
// loads of a warp coalesced along j.
template <typename T>
__global__ void norm_param_grad_kernel(const T* g, const T* x, const acc_t<T>* mean,
                                       const acc_t<T>* rstd, acc_t<T>* dw, acc_t<T>* db,
                                       int64_t rows, int64_t n, bool rms) {
  using A = acc_t<T>;
  const auto ld = [](T v) { return static_cast<A>(static_cast<compute_t<T>>(v)); };
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += step) {
    A sw = 0, sb = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const A gv = ld(g[r * n + j]);
      if (dw != nullptr) sw += gv * (ld(x[r * n + j]) - (rms ? A(0) : mean[r])) * rstd[r];
      sb += gv;
    }
    if (dw != nullptr) dw[j] += sw;
    if (db != nullptr) db[j] += sb;
  }
}

}  // namespace

void norm_backward_cuda(const Tensor& grad_out, const Tensor& x, int64_t n, const Tensor& mean,
                        const Tensor& rstd, const Tensor& weight, bool rms, const Tensor& grad_x,
                        const Tensor& dw, const Tensor& db) {
  const char* op = rms ? "rms_norm_backward" : "layer_norm_backward";
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    using A = acc_t<T>;
    if (x.numel() == 0) return;
    const Tensor gc = grad_out.contiguous(), xc = x.contiguous(), rc = rstd.contiguous();
    const Tensor mc = rms ? Tensor() : mean.contiguous();
    const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
    const int64_t rows = x.numel() / n;
    cuda::DeviceGuard guard(x.device().index);
    const auto in = [](const Tensor& t) {
      return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
    };
    const auto stat = [](const Tensor& t) {
      return t.defined() ? static_cast<const A*>(t.data_ptr()) : nullptr;
    };
    const auto acc = [](const Tensor& t) {
      return t.defined() ? static_cast<A*>(t.data_ptr()) : nullptr;
    };
    if (grad_x.defined()) {
      const int block = row_block_size(n);
      const unsigned int grid = static_cast<unsigned int>(rows < 65535 ? rows : 65535);
      const size_t shm = block * sizeof(A);
      cudaStream_t stream = cuda::current_stream();
      auto* o = static_cast<T*>(grad_x.data_ptr());
      if (row_vectorizable<T>(n, in(gc), in(xc), o)) {
        norm_backward_kernel<T, true><<<grid, block, shm, stream>>>(
            in(gc), in(xc), in(wc), stat(mc), stat(rc), o, rows, n, rms);
      } else {
        norm_backward_kernel<T, false><<<grid, block, shm, stream>>>(
            in(gc), in(xc), in(wc), stat(mc), stat(rc), o, rows, n, rms);
      }
      DT_CHECK_CUDA(cudaGetLastError());
    }
    if (dw.defined() || db.defined()) {
      const int block = 256;
      const int64_t blocks = (n + block - 1) / block;
      const unsigned int grid = static_cast<unsigned int>(blocks < 65535 ? blocks : 65535);
      norm_param_grad_kernel<T><<<grid, block, 0, cuda::current_stream()>>>(
          in(gc), in(xc), stat(mc), stat(rc), acc(dw), acc(db), rows, n, rms);
      DT_CHECK_CUDA(cudaGetLastError());
    }
  });
}

Tensor norm_cuda(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                 std::optional<double> eps, bool rms, const char* op, const Tensor& mean,
                 const Tensor& rstd) {
  return dispatch_floating(x.dtype(), op, [&]<typename T>() {
    Tensor out = empty(x.sizes(), TensorOptions(x.dtype(), x.device()));
    if (x.numel() == 0) return out;
    const double e = eps.has_value() ? *eps : std::numeric_limits<compute_t<T>>::epsilon();
    const Tensor xc = x.contiguous();
    const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
    const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
    const int64_t rows = x.numel() / n;
    cuda::DeviceGuard guard(x.device().index);
    const int block = row_block_size(n);
    const unsigned int grid = static_cast<unsigned int>(rows < 65535 ? rows : 65535);
    const auto* in = static_cast<const T*>(xc.data_ptr());
    auto* o = static_cast<T*>(out.data_ptr());
    const T* wp = wc.defined() ? static_cast<const T*>(wc.data_ptr()) : nullptr;
    const T* bp = bc.defined() ? static_cast<const T*>(bc.data_ptr()) : nullptr;
    auto* mp = mean.defined() ? static_cast<acc_t<T>*>(mean.data_ptr()) : nullptr;
    auto* rp = rstd.defined() ? static_cast<acc_t<T>*>(rstd.data_ptr()) : nullptr;
    const size_t shm = block * sizeof(acc_t<T>);
    cudaStream_t stream = cuda::current_stream();
    if (row_vectorizable<T>(n, in, o)) {
      norm_kernel<T, true><<<grid, block, shm, stream>>>(in, wp, bp, o, mp, rp, rows, n, e, rms);
    } else {
      norm_kernel<T, false><<<grid, block, shm, stream>>>(in, wp, bp, o, mp, rp, rows, n, e, rms);
    }
    DT_CHECK_CUDA(cudaGetLastError());
    return out;
  });
}

}  // namespace dtensor::detail
