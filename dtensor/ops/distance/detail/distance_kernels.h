// The distance family's kernels (distance_cpu.cc, distance_cuda.cu) and the per-pair math they
// share (host and device run the same code). Tensors are contiguous: x1 [B, P, M], x2 [B, R, M],
// dist / grad [B, P, R].
#pragma once

#include <cmath>
#include <cstdint>

#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/macros.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

struct CdistGeom {
  int64_t b, p, r, m;
};

// The p-norm of a - b (m elements each), in double.
template <typename T>
DT_HOST_DEVICE double cdist_pair(const T* a, const T* b, int64_t m, double p) {
  double acc = 0.0;
  const bool inf = p > 1e308;
  for (int64_t k = 0; k < m; ++k) {
    const double d = convert<double>(a[k]) - convert<double>(b[k]);
    const double ad = d < 0 ? -d : d;
    if (p == 0.0) {
      acc += d != d ? d : (d != 0.0 ? 1.0 : 0.0);  // a NaN counts NaN, as PyTorch
    } else if (p == 1.0) {
      acc += ad;
    } else if (p == 2.0) {
      acc += d * d;
    } else if (inf) {
      acc = ad > acc || ad != ad ? ad : acc;
    } else {
      acc += ::pow(ad, p);
    }
  }
  if (p == 2.0) return ::sqrt(acc);
  if (p == 0.0 || p == 1.0 || inf) return acc;
  return ::pow(acc, 1.0 / p);
}

// d dist / d diff for one element (PyTorch's _cdist_backward per p): 0 where dist is 0, and
// where diff is 0 with p < 1 (|diff|^(p - 1) is inf there; PyTorch's subgradient 0); NaN where
// diff is NaN (p > 0), as PyTorch's.
DT_HOST_DEVICE inline double cdist_grad_term(double diff, double dist, double p) {
  if (p == 0.0 || dist == 0.0 || (diff == 0.0 && p < 1.0)) return 0.0;
  if (diff != diff) return diff;
  const double sign = diff > 0 ? 1.0 : (diff < 0 ? -1.0 : 0.0);
  const double ad = diff < 0 ? -diff : diff;
  if (p == 1.0) return sign;
  if (p == 2.0) return diff / dist;
  if (p > 1e308) return ad == dist ? sign : 0.0;
  if (p < 2.0) return sign * ::pow(ad, p - 1.0) / ::pow(dist, p - 1.0);
  return diff * ::pow(ad, p - 2.0) / ::pow(dist, p - 1.0);
}

// The diff cdist_grad_term takes: a - b in double, rounded to T for p inf. dist is a T there,
// the largest |diff| rounded, so the elements that reach it are those whose |diff| rounds to it
// (PyTorch's diff is a T); the exact double |diff| of a float32 pair rarely equals it.
template <typename T>
DT_HOST_DEVICE double cdist_grad_diff(T a, T b, double p) {
  const double diff = convert<double>(a) - convert<double>(b);
  return p > 1e308 ? convert<double>(convert<T>(diff)) : diff;
}

// out [B, P, R] (x1's dtype) = cdist of each pair of rows.
void cdist_cpu(const Tensor& out, const Tensor& x1, const Tensor& x2, CdistGeom g, double p);
// out [B, P, M] = sum_j grad[b, i, j] * cdist_grad_term(x1[b, i, k] - x2[b, j, k], dist[b, i, j]).
void cdist_backward_cpu(const Tensor& out, const Tensor& grad, const Tensor& x1, const Tensor& x2,
                        const Tensor& dist, CdistGeom g, double p);
// The CUDA twins (distance_cuda.cu; distance_no_cuda.cc raises when CUDA is off).
void cdist_cuda(const Tensor& out, const Tensor& x1, const Tensor& x2, CdistGeom g, double p);
void cdist_backward_cuda(const Tensor& out, const Tensor& grad, const Tensor& x1, const Tensor& x2,
                         const Tensor& dist, CdistGeom g, double p);

}  // namespace dtensor::detail
