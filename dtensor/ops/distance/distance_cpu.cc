// CPU kernels of the distance family: cdist and its backward, one output element at a time in
// float64 (the per-pair math of detail/distance_kernels.h, shared with CUDA; p 1 and 2 have
// loops of their own here, without a branch per element).
#include <algorithm>
#include <cmath>
#include <vector>

#include "dtensor/ops/distance/detail/distance_kernels.h"
#include "dtensor/tensor/dtype.h"

namespace dtensor::detail {

namespace {

// The p-norm of a - b, like cdist_pair but with the p form chosen outside the loop and four
// accumulators (independent chains, so the loop is not bound by one addition's latency; the
// order of the additions differs from cdist_pair's only in rounding).
template <typename T>
double pair_distance(const T* a, const T* b, int64_t m, double p) {
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t k = 0;
  const auto diff = [&](int64_t i) { return convert<double>(a[i]) - convert<double>(b[i]); };
  if (p == 2.0) {
    for (; k + 4 <= m; k += 4) {
      for (int u = 0; u < 4; ++u) acc[u] += diff(k + u) * diff(k + u);
    }
    for (; k < m; ++k) acc[0] += diff(k) * diff(k);
    return std::sqrt((acc[0] + acc[1]) + (acc[2] + acc[3]));
  }
  if (p == 1.0) {
    for (; k + 4 <= m; k += 4) {
      for (int u = 0; u < 4; ++u) acc[u] += std::fabs(diff(k + u));
    }
    for (; k < m; ++k) acc[0] += std::fabs(diff(k));
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
  }
  return cdist_pair(a, b, m, p);
}

}  // namespace

void cdist_cpu(const Tensor& out, const Tensor& x1, const Tensor& x2, CdistGeom g, double p) {
  dispatch_floating(x1.dtype(), "cdist", [&]<typename T>() {
    const T* a = x1.data<T>();
    const T* b = x2.data<T>();
    T* o = out.data<T>();
    for (int64_t n = 0; n < g.b; ++n) {
      for (int64_t i = 0; i < g.p; ++i) {
        const T* row = a + (n * g.p + i) * g.m;
        T* dst = o + (n * g.p + i) * g.r;
        for (int64_t j = 0; j < g.r; ++j) {
          dst[j] = convert<T>(pair_distance(row, b + (n * g.r + j) * g.m, g.m, p));
        }
      }
    }
  });
}

void cdist_backward_cpu(const Tensor& out, const Tensor& grad, const Tensor& x1, const Tensor& x2,
                        const Tensor& dist, CdistGeom g, double p) {
  dispatch_floating(x1.dtype(), "cdist_backward", [&]<typename T>() {
    const T* a = x1.data<T>();
    const T* b = x2.data<T>();
    const T* gr = grad.data<T>();
    const T* d = dist.data<T>();
    T* o = out.data<T>();
    std::vector<double> acc(static_cast<size_t>(g.m));
    for (int64_t n = 0; n < g.b; ++n) {
      for (int64_t i = 0; i < g.p; ++i) {
        const T* row = a + (n * g.p + i) * g.m;
        const int64_t pr = (n * g.p + i) * g.r;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < g.r; ++j) {
          const double gij = convert<double>(gr[pr + j]), dij = convert<double>(d[pr + j]);
          if (gij == 0.0) continue;
          const T* other = b + (n * g.r + j) * g.m;
          if (p == 2.0) {  // the common case: one coefficient per pair, a vectorisable loop
            if (dij == 0.0) continue;
            const double coef = gij / dij;
            for (int64_t k = 0; k < g.m; ++k) {
              acc[k] += coef * (convert<double>(row[k]) - convert<double>(other[k]));
            }
            continue;
          }
          for (int64_t k = 0; k < g.m; ++k) {
            acc[k] += gij * cdist_grad_term(cdist_grad_diff(row[k], other[k], p), dij, p);
          }
        }
        T* dst = o + (n * g.p + i) * g.m;
        for (int64_t k = 0; k < g.m; ++k) dst[k] = convert<T>(acc[k]);
      }
    }
  });
}

}  // namespace dtensor::detail
