// CUDA reductions: one thread block per output element (grid-stride over outputs); the block's
// threads stride over the reduced elements and combine in shared memory. Floating inputs
// accumulate in double and integer sums in int64, like reduction_cpu.cc; var takes two passes
// (the mean, then the squared deviations).
#include <cstdint>
#include <type_traits>

#include "dtensor/ops/common/detail/block_reduce_cuda.cuh"
#include "dtensor/ops/reduction/detail/reduction_cuda.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/offset_calc_cuda.cuh"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {

namespace {

struct ReduceGeom {
  int kept_nd = 0;
  int red_nd = 0;
  int64_t kept_sizes[kCudaMaxDims] = {};
  int64_t kept_strides[kCudaMaxDims] = {};
  int64_t red_sizes[kCudaMaxDims] = {};
  int64_t red_strides[kCudaMaxDims] = {};
  int64_t out_numel = 0;
  int64_t red_numel = 0;
};

ReduceGeom make_geom(const ReducePlan& p, const char* op) {
  ReduceGeom g;
  DT_CHECK(p.kept_sizes.size() <= static_cast<size_t>(kCudaMaxDims) &&
               p.red_sizes.size() <= static_cast<size_t>(kCudaMaxDims),
           "[%s] CUDA reductions support up to %d kept and %d reduced dims after merging (got %d "
           "and %d)",
           op, static_cast<int64_t>(kCudaMaxDims), static_cast<int64_t>(kCudaMaxDims),
           static_cast<int64_t>(p.kept_sizes.size()), static_cast<int64_t>(p.red_sizes.size()));
  g.kept_nd = static_cast<int>(p.kept_sizes.size());
  g.red_nd = static_cast<int>(p.red_sizes.size());
  for (int d = 0; d < g.kept_nd; ++d) {
    g.kept_sizes[d] = p.kept_sizes[d];
    g.kept_strides[d] = p.kept_strides[d];
  }
  for (int d = 0; d < g.red_nd; ++d) {
    g.red_sizes[d] = p.red_sizes[d];
    g.red_strides[d] = p.red_strides[d];
  }
  g.out_numel = p.out_numel;
  g.red_numel = p.red_numel;
  return g;
}

__device__ __forceinline__ int64_t unravel(int64_t i, int nd, const int64_t* sizes,
                                           const int64_t* strides) {
  int64_t off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    const int64_t q = i / sizes[d];
    off += (i - q * sizes[d]) * strides[d];
    i = q;
  }
  return off;
}

template <typename T>
using acc_t = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, int64_t>;

template <typename T>
__device__ __forceinline__ acc_t<T> load_acc(const T* p) {
  return static_cast<acc_t<T>>(static_cast<compute_t<T>>(*p));
}

// kind: 0 sum, 1 mean, 2 var, 3 std (var's root before the rounding).
template <typename T, typename O, int kKind>
__global__ void sum_kernel(const T* in, O* out, ReduceGeom g, double correction) {
  using A = acc_t<T>;
  A* shm = block_scratch<A>();
  for (int64_t o = blockIdx.x; o < g.out_numel; o += gridDim.x) {
    const T* base = in + unravel(o, g.kept_nd, g.kept_sizes, g.kept_strides);
    A s = 0;
    for (int64_t r = threadIdx.x; r < g.red_numel; r += blockDim.x) {
      s += load_acc(base + unravel(r, g.red_nd, g.red_sizes, g.red_strides));
    }
    s = block_reduce_all(s, shm, BlockSum{});
    if constexpr (kKind == 0) {
      if (threadIdx.x == 0) out[o] = convert<O>(s);
    } else {
      const double n = static_cast<double>(g.red_numel);
      const double m = static_cast<double>(s) / n;
      if constexpr (kKind == 1) {
        if (threadIdx.x == 0) out[o] = convert<O>(m);
      } else {
        double ss = 0;
        for (int64_t r = threadIdx.x; r < g.red_numel; r += blockDim.x) {
          const double d = static_cast<double>(
                               load_acc(base + unravel(r, g.red_nd, g.red_sizes, g.red_strides))) -
                           m;
          ss += d * d;
        }
        ss = block_reduce_all(ss, block_scratch<double>(), BlockSum{});
        const double dof = n - correction;
        const double v = ss / (dof > 0 ? dof : 0.0);
        if (threadIdx.x == 0) out[o] = convert<O>(kKind == 3 ? sqrt(v) : v);
      }
    }
  }
}

// Value and flat reduced index; `valid` false for threads that saw no element.
template <typename C>
struct ArgVal {
  C v;
  int64_t i;
  bool valid;
};

template <typename C, bool kMax>
struct ArgCombine {
  // NaN wins (the first NaN), then the larger (smaller) value, ties to the lower index.
  __device__ ArgVal<C> operator()(const ArgVal<C>& a, const ArgVal<C>& b) const {
    if (!a.valid) return b;
    if (!b.valid) return a;
    const bool an = a.v != a.v, bn = b.v != b.v;
    if (an || bn) {
      if (an && bn) return a.i <= b.i ? a : b;
      return an ? a : b;
    }
    if (a.v == b.v) return a.i <= b.i ? a : b;
    if constexpr (kMax)
      return a.v > b.v ? a : b;
    else
      return a.v < b.v ? a : b;
  }
};

// Writes the extreme value (values, may be null) and its flat reduced index (indices, may be
// null).
template <typename T, bool kMax>
__global__ void arg_kernel(const T* in, T* values, int64_t* indices, ReduceGeom g) {
  using C = compute_t<T>;
  ArgVal<C>* shm = block_scratch<ArgVal<C>>();
  const ArgCombine<C, kMax> combine;
  for (int64_t o = blockIdx.x; o < g.out_numel; o += gridDim.x) {
    const T* base = in + unravel(o, g.kept_nd, g.kept_sizes, g.kept_strides);
    ArgVal<C> acc{C(0), 0, false};
    for (int64_t r = threadIdx.x; r < g.red_numel; r += blockDim.x) {
      const C v = static_cast<C>(base[unravel(r, g.red_nd, g.red_sizes, g.red_strides)]);
      acc = combine(acc, ArgVal<C>{v, r, true});
    }
    acc = block_reduce_all(acc, shm, combine);
    if (threadIdx.x == 0) {
      if (values != nullptr) values[o] = convert<T>(acc.v);
      if (indices != nullptr) indices[o] = acc.i;
    }
  }
}

unsigned int grid_for_outputs(int64_t out_numel) {
  const int64_t cap = 65535;
  return static_cast<unsigned int>(out_numel < cap ? out_numel : cap);
}

}  // namespace

void reduce_cuda(ReduceOp op, const Tensor& out, const Tensor& in, const ReducePlan& plan,
                 int64_t correction) {
  if (plan.out_numel == 0) return;
  const ReduceGeom g = make_geom(plan, "reduce");
  cuda::DeviceGuard guard(in.device().index);
  const int block = row_block_size(plan.red_numel);
  const unsigned int grid = grid_for_outputs(plan.out_numel);
  cudaStream_t stream = cuda::current_stream();
  dispatch_dtype(in.dtype(), [&]<typename T>() {
    const T* p = static_cast<const T*>(in.data_ptr());
    using A = acc_t<T>;
    if (op == ReduceOp::kMax || op == ReduceOp::kMin) {
      using C = compute_t<T>;
      const size_t shm = block * sizeof(ArgVal<C>);
      T* o = static_cast<T*>(out.data_ptr());
      if (op == ReduceOp::kMax) {
        arg_kernel<T, true><<<grid, block, shm, stream>>>(p, o, nullptr, g);
      } else {
        arg_kernel<T, false><<<grid, block, shm, stream>>>(p, o, nullptr, g);
      }
      return;
    }
    const size_t shm = block * sizeof(double);  // A is double or int64 (8 bytes)
    static_assert(sizeof(A) == 8);
    if constexpr (std::is_floating_point_v<A>) {
      T* o = static_cast<T*>(out.data_ptr());
      switch (op) {
        case ReduceOp::kSum:
          sum_kernel<T, T, 0><<<grid, block, shm, stream>>>(p, o, g, 0.0);
          break;
        case ReduceOp::kMean:
          sum_kernel<T, T, 1><<<grid, block, shm, stream>>>(p, o, g, 0.0);
          break;
        case ReduceOp::kStd:
          sum_kernel<T, T, 3>
              <<<grid, block, shm, stream>>>(p, o, g, static_cast<double>(correction));
          break;
        default:
          sum_kernel<T, T, 2>
              <<<grid, block, shm, stream>>>(p, o, g, static_cast<double>(correction));
      }
    } else {
      DT_CHECK(op == ReduceOp::kSum, "[reduce_cuda] mean/var need a floating dtype, got %s",
               dtype_name(dtype_of_v<T>));
      sum_kernel<T, int64_t, 0>
          <<<grid, block, shm, stream>>>(p, static_cast<int64_t*>(out.data_ptr()), g, 0.0);
    }
  });
  DT_CHECK_CUDA(cudaGetLastError());
}

void arg_reduce_cuda(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in,
                     const ReducePlan& plan) {
  if (plan.out_numel == 0) return;
  const ReduceGeom g = make_geom(plan, is_max ? "argmax" : "argmin");
  cuda::DeviceGuard guard(in.device().index);
  const int block = row_block_size(plan.red_numel);
  const unsigned int grid = grid_for_outputs(plan.out_numel);
  cudaStream_t stream = cuda::current_stream();
  dispatch_dtype(in.dtype(), [&]<typename T>() {
    using C = compute_t<T>;
    const size_t shm = block * sizeof(ArgVal<C>);
    const T* p = static_cast<const T*>(in.data_ptr());
    T* v = values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr;
    int64_t* ix = static_cast<int64_t*>(indices.data_ptr());
    if (is_max) {
      arg_kernel<T, true><<<grid, block, shm, stream>>>(p, v, ix, g);
    } else {
      arg_kernel<T, false><<<grid, block, shm, stream>>>(p, v, ix, g);
    }
  });
  DT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace dtensor::detail
