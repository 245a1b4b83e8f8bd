// CPU kernels of the pool family's window computation (detail/windows.h): each output element
// runs its taps in table order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/common/detail/parallel_for.h"
#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/tensor/convert.h"

namespace dtensor::detail {
namespace {

// Calls f(k, row, o) for every output element k = p * n_out + o of the planes (row: x's plane
// p), on the intra-op threads, split by the taps' average count.
template <typename T, typename F>
void for_each_output(const Tensor& x, const TapTensors& t, int64_t planes, int64_t n_out,
                     const F& f) {
  const int64_t n_in = x.size(1);
  const int64_t* off = t.offsets.data<int64_t>();
  const T* src = x.data<T>();
  const int64_t work = std::max<int64_t>(1, off[n_out] / n_out);
  parallel_for(0, planes * n_out, std::max<int64_t>(1, kGrainSize / work),
               [&](int64_t b, int64_t e) {
                 int64_t o = b % n_out;
                 const T* row = src + (b / n_out) * n_in;
                 for (int64_t k = b; k < e; ++k) {
                   f(k, row, o);
                   if (++o == n_out) {
                     o = 0;
                     row += n_in;
                   }
                 }
               });
}

}  // namespace

void window_sum_planes(const Tensor& x, const TapTensors& t, const Tensor& out) {
  if (x.device().is_cuda()) return window_sum_planes_cuda(x, t, out);
  const int64_t planes = out.size(0), n_out = out.size(1);
  if (planes == 0 || n_out == 0) return;
  const int64_t* off = t.offsets.data<int64_t>();
  const int64_t* idx = t.index.data<int64_t>();
  const double* w = t.weight.data<double>();
  dispatch_floating(x.dtype(), "window", [&]<typename T>() {
    using C = compute_t<T>;
    T* dst = out.data<T>();
    if (t.gather) {  // one tap of weight 1 each: a copy, exact in every dtype
      for_each_output<T>(x, t, planes, n_out,
                         [&](int64_t k, const T* row, int64_t o) { dst[k] = row[idx[o]]; });
      return;
    }
    for_each_output<T>(x, t, planes, n_out, [&](int64_t k, const T* row, int64_t o) {
      if (off[o] == off[o + 1] && t.fill) {
        dst[k] = convert<T>(t.value);
        return;
      }
      double acc = 0;
      for (int64_t q = off[o]; q < off[o + 1]; ++q) {
        acc += w[q] * static_cast<double>(static_cast<C>(row[idx[q]]));
      }
      dst[k] = convert<T>(acc);
    });
  });
}

void window_max_planes(const Tensor& x, const TapTensors& t, const Tensor& values,
                       const Tensor& indices) {
  if (x.device().is_cuda()) return window_max_planes_cuda(x, t, values, indices);
  const int64_t planes = values.size(0), n_out = values.size(1);
  if (planes == 0 || n_out == 0) return;
  const int64_t* off = t.offsets.data<int64_t>();
  const int64_t* idx = t.index.data<int64_t>();
  dispatch_floating(x.dtype(), "max_pool", [&]<typename T>() {
    using C = compute_t<T>;
    T* vals = values.data<T>();
    int64_t* ind = indices.data<int64_t>();
    for_each_output<T>(x, t, planes, n_out, [&](int64_t k, const T* row, int64_t o) {
      // PyTorch's scan: the first largest, a NaN always taking over.
      C best = -std::numeric_limits<C>::infinity();
      int64_t at = off[o] < off[o + 1] ? idx[off[o]] : -1;
      for (int64_t q = off[o]; q < off[o + 1]; ++q) {
        const C v = static_cast<C>(row[idx[q]]);
        if (v > best || std::isnan(v)) {
          best = v;
          at = idx[q];
        }
      }
      vals[k] = at >= 0 ? row[at] : convert<T>(static_cast<double>(best));
      ind[k] = at;
    });
  });
}

void index_add_planes(const Tensor& g, const Tensor& indices, const Tensor& out) {
  if (g.device().is_cuda()) return index_add_planes_cuda(g, indices, out);
  const int64_t planes = g.size(0), n_out = g.size(1), n_in = out.size(1);
  if (planes == 0 || n_out == 0) return;
  dispatch_floating(g.dtype(), "max_pool_backward", [&]<typename T>() {
    using C = compute_t<T>;
    const T* src = g.data<T>();
    const int64_t* ind = indices.data<int64_t>();
    T* dst = out.data<T>();
    parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / n_out), [&](int64_t b, int64_t e) {
      std::vector<double> acc(static_cast<size_t>(n_in));
      for (int64_t p = b; p < e; ++p) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t o = 0; o < n_out; ++o) {
          const int64_t i = ind[p * n_out + o];
          if (i < 0 || i >= n_in) continue;  // not an index max pool gives
          acc[i] += static_cast<double>(static_cast<C>(src[p * n_out + o]));
        }
        for (int64_t i = 0; i < n_in; ++i) dst[p * n_in + i] = convert<T>(acc[i]);
      }
    });
  });
}

}  // namespace dtensor::detail
