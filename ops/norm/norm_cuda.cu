// CUDA layer_norm / rms_norm: one block per row of n elements, two reductions (mean, then the
// centred sum of squares) and a write pass, as norm_cpu.cc.
#include <limits>
#include <type_traits>

#include "ops/common/block_reduce_cuda.cuh"
#include "ops/norm/norm_cuda.h"
#include "tensor/convert.h"
#include "tensor/creation.h"
#include "tensor/stream_cuda.h"

namespace dtensor::detail {

namespace {

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<compute_t<T>, float>, float, double>;

template <typename A>
struct Add {
  __device__ A operator()(A a, A b) const { return a + b; }
};

template <typename T>
__global__ void norm_kernel(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t n,
                            double eps, bool rms) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* shm = reinterpret_cast<A*>(smem_raw);
  const auto ld = [](T v) { return static_cast<A>(static_cast<compute_t<T>>(v)); };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    A mean = 0;
    if (!rms) {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mean += ld(xr[i]);
      mean = block_reduce_all(mean, shm, Add<A>{}) / static_cast<A>(n);
    }
    A sq = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const A c = ld(xr[i]) - mean;
      sq += c * c;
    }
    sq = block_reduce_all(sq, shm, Add<A>{});
    const A inv = A(1) / sqrt(sq / static_cast<A>(n) + static_cast<A>(eps));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      A v = (ld(xr[i]) - mean) * inv;
      if (w != nullptr) v *= ld(w[i]);
      if (b != nullptr) v += ld(b[i]);
      yr[i] = convert<T>(static_cast<compute_t<T>>(v));
    }
  }
}

}  // namespace

Tensor norm_cuda(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                 std::optional<double> eps, bool rms, const char* op) {
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
    norm_kernel<T><<<grid, block, block * sizeof(acc_t<T>), cuda::current_stream()>>>(
        static_cast<const T*>(xc.data_ptr()),
        wc.defined() ? static_cast<const T*>(wc.data_ptr()) : nullptr,
        bc.defined() ? static_cast<const T*>(bc.data_ptr()) : nullptr,
        static_cast<T*>(out.data_ptr()), rows, n, e, rms);
    DT_CHECK_CUDA(cudaGetLastError());
    return out;
  });
}

}  // namespace dtensor::detail
