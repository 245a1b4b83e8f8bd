// CUDA loss kernels: one thread per (outer, inner) target element.
#include <cstdint>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/detail/loss_cuda.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::detail {

namespace {

constexpr int kBlock = 256;

// Device counters: [0] a target was out of range, [1] that target, [2] counted elements
// (reduce_loss).
using Counters = unsigned long long;

// loss[e] = (1 - s) * -w[t] * x[t] + s / C * sum_c -w[c] * x[c] (w all ones without `w`),
// wts[e] = w[t]; both 0 for ignored and out-of-range targets, so the weighted mean is
// sum(loss) / sum(wts).
template <typename T>
__global__ void nll_kernel(const T* x, const int64_t* tg, const double* w, double* loss,
                           double* wts, int64_t n, int64_t classes, int64_t inner,
                           int64_t ignore_index, double smoothing, Counters* cnt) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t o = e / inner, j = e - o * inner;
    const int64_t t = tg[e];
    loss[e] = 0.0;
    wts[e] = 0.0;
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes) {
      if (atomicCAS(&cnt[0], 0ull, 1ull) == 0ull) cnt[1] = static_cast<Counters>(t);
      continue;
    }
    const T* xo = x + o * classes * inner + j;
    const double wt = w != nullptr ? w[t] : 1.0;
    double v = -wt * static_cast<double>(static_cast<compute_t<T>>(xo[t * inner]));
    if (smoothing != 0.0) {
      double s = 0;
      for (int64_t c = 0; c < classes; ++c) {
        const double xc = static_cast<double>(static_cast<compute_t<T>>(xo[c * inner]));
        s -= w != nullptr ? w[c] * xc : xc;
      }
      v = (1.0 - smoothing) * v + smoothing / static_cast<double>(classes) * s;
    }
    loss[e] = v;
    wts[e] = wt;
  }
}

// cross_entropy with class probabilities: loss[e] = -sum_c w[c] * (p[c] * keep + spread) *
// x[c] over the classes of element e (w all ones without `w`).
template <typename T>
__global__ void probs_kernel(const T* x, const T* p, const double* w, double* loss, int64_t n,
                             int64_t classes, int64_t inner, double keep, double spread) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t o = e / inner, j = e - o * inner;
    const int64_t base = o * classes * inner + j;
    double v = 0;
    for (int64_t c = 0; c < classes; ++c) {
      const double q =
          static_cast<double>(static_cast<compute_t<T>>(p[base + c * inner])) * keep + spread;
      v -= (w != nullptr ? w[c] * q : q) *
           static_cast<double>(static_cast<compute_t<T>>(x[base + c * inner]));
    }
    loss[e] = v;
  }
}

template <typename T>
__global__ void gather_kernel(const T* x, const int64_t* tg, T* out, int64_t n, int64_t classes,
                              int64_t inner, int64_t class_offset, int64_t ignore_index) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t o = e / inner, j = e - o * inner;
    const int64_t t = tg[e];
    const int64_t c = t - class_offset;
    if (t == ignore_index || c < 0 || c >= classes) {
      out[e] = T(0.0f);
    } else {
      out[e] = x[(o * classes + c) * inner + j];
    }
  }
}

// One rank's block of the registered nll_loss (loss_cpu.h: nll_loss_block_cpu): loss[e] =
// -w[t] * x[t - class_offset] for the targets in the block, 0 for the others.
template <typename T>
__global__ void nll_block_kernel(const T* x, const int64_t* tg, const double* w, double* loss,
                                 int64_t n, LossLayout l, NllBlock b) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t o = e / l.inner, j = e - o * l.inner;
    const int64_t t = tg[e], c = t - b.class_offset;
    loss[e] = 0.0;
    if (t == b.ignore_index || c < 0 || c >= l.classes) continue;
    const double wt = w != nullptr ? w[t - b.weight_offset] : 1.0;
    loss[e] =
        -wt * static_cast<double>(static_cast<compute_t<T>>(x[(o * l.classes + c) * l.inner + j]));
  }
}

// Its gradient, in double: out (zeroed) gets -w[t] * g / divisor at each counted pick, g the
// element's gradient (per_element) or g[0] (a reduced loss's).
template <typename T>
__global__ void nll_block_grad_kernel(const T* g, bool per_element, const int64_t* tg,
                                      const double* w, double* out, int64_t n, LossLayout l,
                                      NllBlock b, double divisor) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t o = e / l.inner, j = e - o * l.inner;
    const int64_t t = tg[e], c = t - b.class_offset;
    if (t == b.ignore_index || c < 0 || c >= l.classes) continue;
    const double wt = w != nullptr ? w[t - b.weight_offset] : 1.0;
    const double ge = static_cast<double>(static_cast<compute_t<T>>(g[per_element ? e : 0]));
    out[(o * l.classes + c) * l.inner + j] = -wt * ge / divisor;
  }
}

__global__ void mask_kernel(const double* x, const int64_t* tg, double* out, int64_t n,
                            int64_t ignore_index, Counters* cnt) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    if (tg[e] == ignore_index) {
      out[e] = 0.0;
    } else {
      out[e] = x[e];
      atomicAdd(&cnt[2], 1ull);
    }
  }
}

// Stops the kernel (a launch failure that the next synchronisation reports, as PyTorch's
// device-side assert) when the range flag is set.
__global__ void trap_if_flagged(const Counters* cnt) {
  if (cnt[0] != 0) __trap();
}

// The range flag and the bad target, copied back (synchronises the stream). While the stream is
// captured into a CUDA graph (a compiled step's CompileOptions::cuda_graph), where nothing may
// read the host, an out-of-range target stops the graph's launch instead (h stays 0: no error
// raised here).
void read_range_flag(const Tensor& c, int64_t (&h)[2]) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  DT_CHECK_CUDA(cudaStreamIsCapturing(cuda::current_stream(), &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    trap_if_flagged<<<1, 1, 0, cuda::current_stream()>>>(
        static_cast<const Counters*>(c.data_ptr()));
    DT_CHECK_CUDA(cudaGetLastError());
    h[0] = h[1] = 0;
    return;
  }
  DT_CHECK_CUDA(
      cudaMemcpyAsync(h, c.data_ptr(), sizeof(h), cudaMemcpyDeviceToHost, cuda::current_stream()));
  DT_CHECK_CUDA(cudaStreamSynchronize(cuda::current_stream()));
}

// Combines per-element losses (double, on the device) like loss_cpu.cc's finish(). The mean
// divides by `count` (0-d double: the counted elements, or their weights' sum) on the device,
// so no value travels to the host; a count of 0 gives NaN as on the CPU (the sum is zeroed
// first, so s / 0 is 0 / 0 even where s is not 0).
Tensor finish(const Tensor& losses, const Tensor& count, Reduction reduction, DType dtype) {
  if (reduction == Reduction::kNone) return losses.to(dtype);
  Tensor s = sum(losses);
  if (reduction == Reduction::kMean) s = div(mul(s, ne(count, Scalar(0.0)).to(kFloat64)), count);
  return s.to(dtype);
}

}  // namespace

Tensor nll_loss_cuda(const Tensor& log_probs, const Tensor& target, int64_t outer, int64_t classes,
                     int64_t inner, Reduction reduction, int64_t ignore_index, double smoothing,
                     const Tensor& weight) {
  const Device dev = log_probs.device();
  const Tensor lp = log_probs.contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  const Tensor w = weight.defined() ? weight.to(kFloat64).contiguous() : Tensor();
  const int64_t n = tg.numel();
  Tensor losses = empty(target.sizes(), TensorOptions(kFloat64, dev));
  Tensor wts = empty(target.sizes(), TensorOptions(kFloat64, dev));
  Tensor cnt = zeros({3}, TensorOptions(kInt64, dev));
  int64_t h[2] = {0, 0};
  if (n > 0) {
    cuda::DeviceGuard guard(dev.index);
    dispatch_floating(lp.dtype(), "nll_loss", [&]<typename T>() {
      nll_kernel<T><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
          static_cast<const T*>(lp.data_ptr()), static_cast<const int64_t*>(tg.data_ptr()),
          w.defined() ? static_cast<const double*>(w.data_ptr()) : nullptr,
          static_cast<double*>(losses.data_ptr()), static_cast<double*>(wts.data_ptr()), n, classes,
          inner, ignore_index, smoothing, static_cast<Counters*>(cnt.data_ptr()));
    });
    DT_CHECK_CUDA(cudaGetLastError());
    // The CPU raises on an out-of-range target; so must this, which needs the flag on the host.
    read_range_flag(cnt, h);
  }
  DT_CHECK(h[0] == 0, "[nll_loss] target %d out of range for %d classes", h[1], classes);
  return finish(losses, sum(wts), reduction, log_probs.dtype());
}

Tensor cross_entropy_probs_cuda(const Tensor& log_probs, const Tensor& probs, LossLayout l,
                                Reduction reduction, double smoothing, const Tensor& weight) {
  const Device dev = log_probs.device();
  const Tensor lp = log_probs.contiguous();
  const Tensor pr = probs.contiguous();
  const Tensor w = weight.defined() ? weight.to(kFloat64).contiguous() : Tensor();
  const int64_t n = l.outer * l.inner;
  Shape shape = probs.sizes();
  shape.erase(shape.begin() + (probs.dim() == 1 ? 0 : 1));
  Tensor losses = zeros(shape, TensorOptions(kFloat64, dev));
  if (n > 0 && l.classes > 0) {
    cuda::DeviceGuard guard(dev.index);
    dispatch_floating(lp.dtype(), "cross_entropy", [&]<typename T>() {
      probs_kernel<T><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
          static_cast<const T*>(lp.data_ptr()), static_cast<const T*>(pr.data_ptr()),
          w.defined() ? static_cast<const double*>(w.data_ptr()) : nullptr,
          static_cast<double*>(losses.data_ptr()), n, l.classes, l.inner, 1.0 - smoothing,
          smoothing / static_cast<double>(l.classes));
    });
    DT_CHECK_CUDA(cudaGetLastError());
  }
  // The mean divides by the number of rows (NaN when there are no rows or no classes).
  const Tensor count =
      full({}, l.classes == 0 ? 0.0 : static_cast<double>(n), TensorOptions(kFloat64, dev));
  return finish(losses, count, reduction, log_probs.dtype());
}

Tensor nll_loss_block_cuda(const Tensor& log_probs, const Tensor& target, LossLayout l,
                           const NllBlock& b, const Tensor& weight, bool sum_them) {
  const Device dev = log_probs.device();
  const Tensor lp = log_probs.contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  const Tensor w = weight.defined() ? weight.to(kFloat64).contiguous() : Tensor();
  const int64_t n = tg.numel();
  Tensor losses = zeros(target.sizes(), TensorOptions(kFloat64, dev));
  if (n > 0) {
    cuda::DeviceGuard guard(dev.index);
    dispatch_floating(lp.dtype(), "nll_loss", [&]<typename T>() {
      nll_block_kernel<T><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
          static_cast<const T*>(lp.data_ptr()), static_cast<const int64_t*>(tg.data_ptr()),
          w.defined() ? static_cast<const double*>(w.data_ptr()) : nullptr,
          static_cast<double*>(losses.data_ptr()), n, l, b);
    });
    DT_CHECK_CUDA(cudaGetLastError());
  }
  return sum_them ? sum(losses) : losses.to(log_probs.dtype());
}

Tensor nll_loss_block_grad_cuda(const Tensor& grad, const Tensor& target, const Shape& shape,
                                LossLayout l, const NllBlock& b, const Tensor& weight,
                                double divisor) {
  const Device dev = grad.device();
  const Tensor g = grad.contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  const Tensor w = weight.defined() ? weight.to(kFloat64).contiguous() : Tensor();
  const int64_t n = tg.numel();
  Tensor out = zeros(shape, TensorOptions(kFloat64, dev));
  if (n > 0 && out.numel() > 0) {
    cuda::DeviceGuard guard(dev.index);
    dispatch_floating(g.dtype(), "nll_loss_backward", [&]<typename T>() {
      nll_block_grad_kernel<T><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
          static_cast<const T*>(g.data_ptr()), g.dim() > 0,
          static_cast<const int64_t*>(tg.data_ptr()),
          w.defined() ? static_cast<const double*>(w.data_ptr()) : nullptr,
          static_cast<double*>(out.data_ptr()), n, l, b, divisor);
    });
    DT_CHECK_CUDA(cudaGetLastError());
  }
  return out.to(grad.dtype());
}

Tensor gather_target_log_probs_cuda(const Tensor& log_probs, const Tensor& target, int64_t outer,
                                    int64_t classes, int64_t inner, int64_t class_offset,
                                    int64_t ignore_index) {
  const Device dev = log_probs.device();
  Tensor out = empty(target.sizes(), TensorOptions(log_probs.dtype(), dev));
  const int64_t n = out.numel();
  if (n == 0) return out;
  const Tensor lp = log_probs.contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  cuda::DeviceGuard guard(dev.index);
  dispatch_floating(lp.dtype(), "gather_target_log_probs", [&]<typename T>() {
    gather_kernel<T><<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        static_cast<const T*>(lp.data_ptr()), static_cast<const int64_t*>(tg.data_ptr()),
        static_cast<T*>(out.data_ptr()), n, classes, inner, class_offset, ignore_index);
  });
  DT_CHECK_CUDA(cudaGetLastError());
  return out;
}

Tensor reduce_loss_cuda(const Tensor& losses, const Tensor& target, Reduction reduction,
                        int64_t ignore_index) {
  const Device dev = losses.device();
  const Tensor lv = losses.to(kFloat64).contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  const int64_t n = lv.numel();
  Tensor vals = empty(target.sizes(), TensorOptions(kFloat64, dev));
  Tensor cnt = zeros({3}, TensorOptions(kInt64, dev));
  if (n > 0) {
    cuda::DeviceGuard guard(dev.index);
    mask_kernel<<<cuda::grid_for(n, kBlock), kBlock, 0, cuda::current_stream()>>>(
        static_cast<const double*>(lv.data_ptr()), static_cast<const int64_t*>(tg.data_ptr()),
        static_cast<double*>(vals.data_ptr()), n, ignore_index,
        static_cast<Counters*>(cnt.data_ptr()));
    DT_CHECK_CUDA(cudaGetLastError());
  }
  return finish(vals, cnt.select(0, 2).to(kFloat64), reduction, losses.dtype());
}

}  // namespace dtensor::detail
