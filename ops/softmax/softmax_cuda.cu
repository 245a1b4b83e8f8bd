// CUDA softmax: the input as [outer, d, inner] (contiguous); one block per (outer, inner) slice
// of d elements, three passes (max, sum of exp, write) as in softmax_cpu.cc.
#include <type_traits>

#include "ops/common/block_reduce_cuda.cuh"
#include "ops/softmax/softmax_cuda.h"
#include "tensor/convert.h"
#include "tensor/creation.h"
#include "tensor/shape.h"
#include "tensor/stream_cuda.h"

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
template <typename A>
struct Add {
  __device__ A operator()(A a, A b) const { return a + b; }
};

template <typename T>
__global__ void softmax_kernel(const T* in, T* out, int64_t outer, int64_t d, int64_t inner,
                               bool log) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* shm = reinterpret_cast<A*>(smem_raw);
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
    sum = block_reduce_all(sum, shm, Add<A>{});
    sum = log ? ::log(sum) : A(1) / sum;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const A v = ld(i) - mx;
      const A r = log ? v - sum : exp(v) * sum;
      y[i * inner] = convert<T>(static_cast<compute_t<T>>(r));
    }
  }
}

}  // namespace

Tensor softmax_cuda(const Tensor& x, int64_t dd, bool log, const char* op) {
  const int64_t nd = x.dim();
  return dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const Tensor xc = x.contiguous();
    Tensor out = empty(x.sizes(), TensorOptions(x.dtype(), x.device()));
    if (x.numel() == 0) return out;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < dd; ++i) outer *= x.size(i);
    for (int64_t i = dd + 1; i < nd; ++i) inner *= x.size(i);
    const int64_t d = nd == 0 ? 1 : x.size(dd);
    cuda::DeviceGuard guard(x.device().index);
    const int block = row_block_size(d);
    const int64_t slices = outer * inner;
    const unsigned int grid = static_cast<unsigned int>(slices < 65535 ? slices : 65535);
    softmax_kernel<T><<<grid, block, block * sizeof(acc_t<T>), cuda::current_stream()>>>(
        static_cast<const T*>(xc.data_ptr()), static_cast<T*>(out.data_ptr()), outer, d, inner,
        log);
    DT_CHECK_CUDA(cudaGetLastError());
    return out;
  });
}

}  // namespace dtensor::detail
