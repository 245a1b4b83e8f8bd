// CUDA softmax and its backward: the input as [outer, d, inner] (contiguous); one block per
// (outer, inner) slice of d elements. Forward: three passes (max, sum of exp, write) with the
// CPU kernel's formulas, the second and third from cache; slices along the last dim read and
// write 16 bytes at a time where aligned. Backward: one block reduction (sum of grad_out * out,
// or of grad_out) and a write pass.
#include <type_traits>

#include "dtensor/ops/common/detail/block_reduce_cuda.cuh"
#include "dtensor/ops/common/detail/dim_layout.h"
#include "dtensor/ops/softmax/detail/softmax_cuda.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {

namespace {

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<compute_t<T>, float>, float, double>;

template <typename A>
struct MaxNan {
  __device__ A operator()(A a, A b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
  }
};

template <typename T>
__global__ void softmax_kernel(const T* in, T* out, int64_t outer, int64_t d, int64_t inner,
                               bool log) {
  using A = acc_t<T>;
  A* shm = block_scratch<A>();
  for (int64_t s = blockIdx.x; s < outer * inner; s += gridDim.x) {
    const int64_t o = s / inner, j = s - o * inner;
    const T* x = in + o * d * inner + j;
    T* y = out + o * d * inner + j;
    const auto ld = [&](int64_t i) {
      return static_cast<A>(static_cast<compute_t<T>>(x[i * inner]));
    };
    A mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const A v = ld(i);
      if (!(v <= mx)) mx = v;  // NaN wins
    }
    mx = block_reduce_all(mx, shm, MaxNan<A>{});
    A sum = 0;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum += exp(ld(i) - mx);
    sum = block_reduce_all(sum, shm, BlockSum{});
    sum = log ? ::log(sum) : A(1) / sum;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const A v = ld(i) - mx;
      const A r = log ? v - sum : exp(v) * sum;
      y[i * inner] = convert<T>(static_cast<compute_t<T>>(r));
    }
  }
}

// The same for slices along the last dim (inner == 1): rows of d contiguous elements, read in
// 16-byte groups with kVec.
template <typename T, bool kVec>
__global__ void softmax_rows_kernel(const T* in, T* out, int64_t rows, int64_t d, bool log) {
  using A = acc_t<T>;
  A* shm = block_scratch<A>();
  const auto ld = [](T v) { return static_cast<A>(static_cast<compute_t<T>>(v)); };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = in + r * d;
    A mx = -INFINITY;
    row_for_each<kVec>(x, d, [&](int64_t, T v) {
      const A a = ld(v);
      if (!(a <= mx)) mx = a;  // NaN wins
    });
    mx = block_reduce_all(mx, shm, MaxNan<A>{});
    A sum = 0;
    row_for_each<kVec>(x, d, [&](int64_t, T v) { sum += exp(ld(v) - mx); });
    sum = block_reduce_all(sum, shm, BlockSum{});
    sum = log ? ::log(sum) : A(1) / sum;
    row_map<kVec>(x, out + r * d, d, [&](int64_t, T v) {
      const A a = ld(v) - mx;
      return convert<T>(static_cast<compute_t<T>>(log ? a - sum : exp(a) * sum));
    });
  }
}

template <typename T>
__global__ void softmax_backward_kernel(const T* g, const T* y, T* gx, int64_t outer, int64_t d,
                                        int64_t inner, bool log) {
  using A = acc_t<T>;
  A* shm = block_scratch<A>();
  for (int64_t s = blockIdx.x; s < outer * inner; s += gridDim.x) {
    const int64_t o = s / inner, j = s - o * inner;
    const int64_t base = o * d * inner + j;
    const auto ld = [&](const T* p, int64_t i) {
      return static_cast<A>(static_cast<compute_t<T>>(p[base + i * inner]));
    };
    A acc = 0;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      acc += log ? ld(g, i) : ld(g, i) * ld(y, i);
    }
    acc = block_reduce_all(acc, shm, BlockSum{});
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const A gi = ld(g, i), yi = ld(y, i);
      const A r = log ? gi - exp(yi) * acc : yi * (gi - acc);
      gx[base + i * inner] = convert<T>(static_cast<compute_t<T>>(r));
    }
  }
}

// The same for slices along the last dim (inner == 1), 16-byte groups with kVec.
template <typename T, bool kVec>
__global__ void softmax_backward_rows_kernel(const T* g, const T* y, T* gx, int64_t rows, int64_t d,
                                             bool log) {
  using A = acc_t<T>;
  A* shm = block_scratch<A>();
  const auto ld = [](T v) { return static_cast<A>(static_cast<compute_t<T>>(v)); };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * d;
    A acc = 0;
    row_for_each<kVec>(g + base, y + base, d,
                       [&](int64_t, T gv, T yv) { acc += log ? ld(gv) : ld(gv) * ld(yv); });
    acc = block_reduce_all(acc, shm, BlockSum{});
    row_map<kVec>(g + base, y + base, gx + base, d, [&](int64_t, T gv, T yv) {
      const A gi = ld(gv), yi = ld(yv);
      return convert<T>(static_cast<compute_t<T>>(log ? gi - exp(yi) * acc : yi * (gi - acc)));
    });
  }
}

// The launch geometry shared by the forward and backward kernels: one block per slice.
struct SliceLaunch : DimLayout {
  int block = 32;
  unsigned int grid = 1;
};

SliceLaunch slice_launch(const Tensor& x, int64_t dd) {
  SliceLaunch l;
  static_cast<DimLayout&>(l) = dim_layout(x.sizes(), dd);
  l.block = row_block_size(l.d);
  const int64_t slices = l.outer * l.inner;
  l.grid = static_cast<unsigned int>(slices < 65535 ? slices : 65535);
  return l;
}

}  // namespace

Tensor softmax_backward_cuda(const Tensor& grad_out, const Tensor& out, int64_t dd, bool log,
                             const char* op) {
  return dispatch_floating(out.dtype(), op, [&]<typename T>() {
    const Tensor gc = grad_out.contiguous(), oc = out.contiguous();
    Tensor gx = empty(out.sizes(), TensorOptions(out.dtype(), out.device()));
    if (out.numel() == 0) return gx;
    const SliceLaunch l = slice_launch(out, dd);
    cuda::DeviceGuard guard(out.device().index);
    const auto* gp = static_cast<const T*>(gc.data_ptr());
    const auto* yp = static_cast<const T*>(oc.data_ptr());
    auto* o = static_cast<T*>(gx.data_ptr());
    const size_t shm = l.block * sizeof(acc_t<T>);
    cudaStream_t stream = cuda::current_stream();
    if (l.inner != 1) {
      softmax_backward_kernel<T>
          <<<l.grid, l.block, shm, stream>>>(gp, yp, o, l.outer, l.d, l.inner, log);
    } else if (row_vectorizable<T>(l.d, gp, yp, o)) {
      softmax_backward_rows_kernel<T, true>
          <<<l.grid, l.block, shm, stream>>>(gp, yp, o, l.outer, l.d, log);
    } else {
      softmax_backward_rows_kernel<T, false>
          <<<l.grid, l.block, shm, stream>>>(gp, yp, o, l.outer, l.d, log);
    }
    DT_CHECK_CUDA(cudaGetLastError());
    return gx;
  });
}

Tensor softmax_cuda(const Tensor& x, int64_t dd, bool log, const char* op) {
  return dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const Tensor xc = x.contiguous();
    Tensor out = empty(x.sizes(), TensorOptions(x.dtype(), x.device()));
    if (x.numel() == 0) return out;
    const SliceLaunch l = slice_launch(x, dd);
    cuda::DeviceGuard guard(x.device().index);
    const auto* in = static_cast<const T*>(xc.data_ptr());
    auto* o = static_cast<T*>(out.data_ptr());
    const size_t shm = l.block * sizeof(acc_t<T>);
    cudaStream_t stream = cuda::current_stream();
    if (l.inner != 1) {
      softmax_kernel<T><<<l.grid, l.block, shm, stream>>>(in, o, l.outer, l.d, l.inner, log);
    } else if (row_vectorizable<T>(l.d, in, o)) {
      softmax_rows_kernel<T, true><<<l.grid, l.block, shm, stream>>>(in, o, l.outer, l.d, log);
    } else {
      softmax_rows_kernel<T, false><<<l.grid, l.block, shm, stream>>>(in, o, l.outer, l.d, log);
    }
    DT_CHECK_CUDA(cudaGetLastError());
    return out;
  });
}

}  // namespace dtensor::detail
