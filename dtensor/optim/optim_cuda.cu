// CUDA fused optimizer updates: one thread per element, the same formulas as
// optim_kernels_cpu.cc in the compute type (float for 16-bit parameters).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "dtensor/optim/detail/device_scalars.h"
#include "dtensor/optim/detail/optim_kernels.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::optim::detail {
namespace {

constexpr int kBlock = 256;

// Element <-> compute type (float for the 16-bit types, the type itself otherwise).
__device__ float to_c(__half x) {
  return __half2float(x);
}
__device__ float to_c(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ float to_c(float x) {
  return x;
}
__device__ double to_c(double x) {
  return x;
}
template <typename T>
__device__ T from_c(float x) {
  return static_cast<T>(x);
}
template <>
__device__ __half from_c<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __nv_bfloat16 from_c<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <typename T>
__device__ T from_c(double x) {
  return static_cast<T>(x);
}

// The kernels' scalars, in the compute type: arguments, or read from device memory when
// `from` is set (a CUDA-graph replay's runtime scalars, device_scalars.h). The same values either
// way, so the same results bit for bit.
template <typename C>
struct SgdArgs {
  C lr, mom, damp, wd, sign;
  bool nesterov, first;
};
template <typename C>
struct AdamWArgs {
  C b1, b2, decay, l2, step_size, root_bc2, eps, sign;
};
template <typename C>
struct RMSpropArgs {
  C lr, alpha, eps, wd, mom, sign;
};
template <typename C>
struct AdagradArgs {
  C clr, eps, wd, sign;
};

template <typename T, typename C>
__global__ void sgd_kernel(T* p, const T* g, T* buf, int64_t n, SgdArgs<C> args,
                           const SgdArgs<C>* from) {
  const SgdArgs<C> a = from != nullptr ? *from : args;
  const C lr = a.lr, mom = a.mom, damp = a.damp, wd = a.wd, sign = a.sign;
  const bool nesterov = a.nesterov, first = a.first;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const C w = static_cast<C>(to_c(p[i]));
    C d = sign * static_cast<C>(to_c(g[i])) + wd * w;
    if (buf != nullptr) {
      const C b = first ? d : mom * static_cast<C>(to_c(buf[i])) + damp * d;
      buf[i] = from_c<T>(b);
      d = nesterov ? d + mom * b : b;
    }
    p[i] = from_c<T>(w - lr * d);
  }
}

template <typename T, typename C>
__global__ void adamw_kernel(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, AdamWArgs<C> args,
                             const AdamWArgs<C>* from) {
  const AdamWArgs<C> a = from != nullptr ? *from : args;
  const C b1 = a.b1, b2 = a.b2, decay = a.decay, l2 = a.l2, step_size = a.step_size,
          root_bc2 = a.root_bc2, eps = a.eps, sign = a.sign;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    C gi = sign * static_cast<C>(to_c(g[i]));
    if (l2 != 0) gi += l2 * static_cast<C>(to_c(p[i]));
    const C mi = b1 * static_cast<C>(to_c(m[i])) + (1 - b1) * gi;
    const C vi = b2 * static_cast<C>(to_c(v[i])) + (1 - b2) * gi * gi;
    m[i] = from_c<T>(mi);
    v[i] = from_c<T>(vi);
    C denom_v = vi;
    if (vmax != nullptr) {
      const C old = static_cast<C>(to_c(vmax[i]));
      denom_v = old > vi ? old : vi;
      vmax[i] = from_c<T>(denom_v);
    }
    const C denom = sqrt(denom_v) / root_bc2 + eps;
    p[i] = from_c<T>(static_cast<C>(to_c(p[i])) * decay - step_size * mi / denom);
  }
}

// square_avg `sq` always; `buf` (momentum) and `gavg` (centered) may be nullptr.
template <typename T, typename C>
__global__ void rmsprop_kernel(T* p, const T* g, T* sq, T* buf, T* gavg, int64_t n,
                               RMSpropArgs<C> args, const RMSpropArgs<C>* from) {
  const RMSpropArgs<C> a = from != nullptr ? *from : args;
  const C lr = a.lr, alpha = a.alpha, eps = a.eps, wd = a.wd, mom = a.mom, sign = a.sign;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const C w = static_cast<C>(to_c(p[i]));
    C gi = sign * static_cast<C>(to_c(g[i]));
    if (wd != 0) gi += wd * w;
    const C si = alpha * static_cast<C>(to_c(sq[i])) + (1 - alpha) * gi * gi;
    sq[i] = from_c<T>(si);
    C var = si;
    if (gavg != nullptr) {
      const C ga = alpha * static_cast<C>(to_c(gavg[i])) + (1 - alpha) * gi;
      gavg[i] = from_c<T>(ga);
      var = si - ga * ga;
    }
    const C avg = sqrt(var) + eps;
    if (buf != nullptr) {
      const C b = mom * static_cast<C>(to_c(buf[i])) + gi / avg;
      buf[i] = from_c<T>(b);
      p[i] = from_c<T>(w - lr * b);
    } else {
      p[i] = from_c<T>(w - lr * gi / avg);
    }
  }
}

template <typename T, typename C>
__global__ void adagrad_kernel(T* p, const T* g, T* sum, int64_t n, AdagradArgs<C> args,
                               const AdagradArgs<C>* from) {
  const AdagradArgs<C> a = from != nullptr ? *from : args;
  const C clr = a.clr, eps = a.eps, wd = a.wd, sign = a.sign;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const C w = static_cast<C>(to_c(p[i]));
    C gi = sign * static_cast<C>(to_c(g[i]));
    if (wd != 0) gi += wd * w;
    const C si = static_cast<C>(to_c(sum[i])) + gi * gi;
    sum[i] = from_c<T>(si);
    p[i] = from_c<T>(w - clr * gi / (sqrt(si) + eps));
  }
}

template <typename F>
void by_dtype(DType d, const char* op, F&& f) {
  switch (d) {
    case kFloat32:
      f(float{}, float{});
      break;
    case kFloat64:
      f(double{}, double{});
      break;
    case kFloat16:
      f(__half{}, float{});
      break;
    case kBFloat16:
      f(__nv_bfloat16{}, float{});
      break;
    default:
      DT_FAIL("[%s] expected a floating parameter, got %s", op, dtype_name(d));
  }
}

// The device copy of `a` when a sink is set (device_scalars.h), else nullptr; `launch` false
// when the sink refreshes the scalars only (nothing is to run).
template <typename Args>
const Args* device_args(const Args& a, bool& launch) {
  static_assert(sizeof(Args) <= DeviceScalarSink::kSlotBytes);
  DeviceScalarSink* sink = device_scalar_sink();
  if (sink == nullptr) return nullptr;
  const DeviceScalarSink::Slot slot = sink->next_slot();
  std::memcpy(slot.host, &a, sizeof(Args));
  launch = slot.launch;
  if (!launch) return nullptr;
  DT_CHECK_CUDA(cudaMemcpyAsync(slot.device, slot.host, sizeof(Args), cudaMemcpyHostToDevice,
                                cuda::current_stream()));
  return static_cast<const Args*>(slot.device);
}

}  // namespace

DeviceScalarSink*& device_scalar_sink() {
  static thread_local DeviceScalarSink* sink = nullptr;
  return sink;
}

void sgd_update_cuda(const Tensor& p, const Tensor& g, const Tensor& buf, const SGDStep& s) {
  cuda::DeviceGuard guard(p.device().index);
  const int64_t n = p.numel();
  if (n == 0) return;
  by_dtype(p.dtype(), "SGD", [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    SgdArgs<C> a{};  // value-initialised: no indeterminate padding reaches a slot
    a.lr = static_cast<C>(s.lr);
    a.mom = static_cast<C>(s.momentum);
    a.damp = static_cast<C>(1.0 - s.dampening);
    a.wd = static_cast<C>(s.weight_decay);
    a.sign = static_cast<C>(s.maximize ? -1 : 1);
    a.nesterov = s.nesterov;
    a.first = s.first;
    bool launch = true;
    const SgdArgs<C>* from = device_args(a, launch);
    if (!launch) return;
    sgd_kernel<T, C><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        static_cast<T*>(p.data_ptr()), static_cast<const T*>(g.data_ptr()),
        buf.defined() ? static_cast<T*>(buf.data_ptr()) : nullptr, n, a, from);
  });
}

void adamw_update_cuda(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                       const Tensor& vmax, const AdamWStep& s) {
  cuda::DeviceGuard guard(p.device().index);
  const int64_t n = p.numel();
  if (n == 0) return;
  by_dtype(p.dtype(), "AdamW", [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    AdamWArgs<C> a{};
    a.b1 = static_cast<C>(s.beta1);
    a.b2 = static_cast<C>(s.beta2);
    a.decay = static_cast<C>(s.decoupled_weight_decay ? 1.0 - s.lr * s.weight_decay : 1.0);
    a.l2 = static_cast<C>(s.decoupled_weight_decay ? 0.0 : s.weight_decay);
    a.step_size = static_cast<C>(s.lr / s.bias_correction1);
    a.root_bc2 = static_cast<C>(sqrt(s.bias_correction2));
    a.eps = static_cast<C>(s.eps);
    a.sign = static_cast<C>(s.maximize ? -1 : 1);
    bool launch = true;
    const AdamWArgs<C>* from = device_args(a, launch);
    if (!launch) return;
    adamw_kernel<T, C><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        static_cast<T*>(p.data_ptr()), static_cast<const T*>(g.data_ptr()),
        static_cast<T*>(m.data_ptr()), static_cast<T*>(v.data_ptr()),
        s.amsgrad ? static_cast<T*>(vmax.data_ptr()) : nullptr, n, a, from);
  });
}

void rmsprop_update_cuda(const Tensor& p, const Tensor& g, const Tensor& sq, const Tensor& buf,
                         const Tensor& gavg, const RMSpropStep& s) {
  cuda::DeviceGuard guard(p.device().index);
  const int64_t n = p.numel();
  if (n == 0) return;
  by_dtype(p.dtype(), "RMSprop", [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    RMSpropArgs<C> a{};
    a.lr = static_cast<C>(s.lr);
    a.alpha = static_cast<C>(s.alpha);
    a.eps = static_cast<C>(s.eps);
    a.wd = static_cast<C>(s.weight_decay);
    a.mom = static_cast<C>(s.momentum);
    a.sign = static_cast<C>(s.maximize ? -1 : 1);
    bool launch = true;
    const RMSpropArgs<C>* from = device_args(a, launch);
    if (!launch) return;
    rmsprop_kernel<T, C><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        static_cast<T*>(p.data_ptr()), static_cast<const T*>(g.data_ptr()),
        static_cast<T*>(sq.data_ptr()), buf.defined() ? static_cast<T*>(buf.data_ptr()) : nullptr,
        s.centered ? static_cast<T*>(gavg.data_ptr()) : nullptr, n, a, from);
  });
}

void adagrad_update_cuda(const Tensor& p, const Tensor& g, const Tensor& sum,
                         const AdagradStep& s) {
  cuda::DeviceGuard guard(p.device().index);
  const int64_t n = p.numel();
  if (n == 0) return;
  by_dtype(p.dtype(), "Adagrad", [&](auto t, auto c) {
    using T = decltype(t);
    using C = decltype(c);
    AdagradArgs<C> a{};
    a.clr = static_cast<C>(s.clr);
    a.eps = static_cast<C>(s.eps);
    a.wd = static_cast<C>(s.weight_decay);
    a.sign = static_cast<C>(s.maximize ? -1 : 1);
    bool launch = true;
    const AdagradArgs<C>* from = device_args(a, launch);
    if (!launch) return;
    adagrad_kernel<T, C><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        static_cast<T*>(p.data_ptr()), static_cast<const T*>(g.data_ptr()),
        static_cast<T*>(sum.data_ptr()), n, a, from);
  });
}

}  // namespace dtensor::optim::detail
