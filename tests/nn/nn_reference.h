// Naive reference implementations (plain loops in double on row-major std::vector) for the nn
// module tests, independent of dtensor/ops/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dtensor/tensor/tensor.h"

namespace dtensor::testref {

using Vec = std::vector<double>;

inline Vec vec(const Tensor& t) {
  return t.contiguous().to(kFloat64).to_vector<double>();
}

// x [n, in] @ w[out, in]^T + b[out] -> [n, out]
inline Vec linear(const Vec& x, const Vec& w, const Vec* b, int64_t n, int64_t in, int64_t out) {
  Vec y(static_cast<size_t>(n * out), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int64_t k = 0; k < in; ++k) s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
  }
  return y;
}

inline Vec layer_norm(const Vec& x, const Vec* w, const Vec* b, int64_t n, int64_t d, double eps) {
  Vec y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int64_t k = 0; k < d; ++k) m += x[i * d + k];
    m /= static_cast<double>(d);
    for (int64_t k = 0; k < d; ++k) v += (x[i * d + k] - m) * (x[i * d + k] - m);
    v /= static_cast<double>(d);
    for (int64_t k = 0; k < d; ++k) {
      double z = (x[i * d + k] - m) / std::sqrt(v + eps);
      y[i * d + k] = z * (w ? (*w)[k] : 1.0) + (b ? (*b)[k] : 0.0);
    }
  }
  return y;
}

inline Vec rms_norm(const Vec& x, const Vec* w, int64_t n, int64_t d, double eps) {
  Vec y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double ms = 0;
    for (int64_t k = 0; k < d; ++k) ms += x[i * d + k] * x[i * d + k];
    ms /= static_cast<double>(d);
    for (int64_t k = 0; k < d; ++k) y[i * d + k] = x[i * d + k] / std::sqrt(ms + eps) * (*w)[k];
  }
  return y;
}

inline double gelu(double v) {
  return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
}
inline double silu(double v) {
  return v / (1.0 + std::exp(-v));
}

// Multi-head attention core on fused q/k/v [B, S, H*hd] -> [B, S, H*hd].
inline Vec attention(const Vec& q, const Vec& k, const Vec& v, int64_t B, int64_t S, int64_t H,
                     int64_t hd, bool causal) {
  const int64_t W = H * hd;
  Vec o(static_cast<size_t>(B * S * W), 0.0);
  std::vector<double> p(static_cast<size_t>(S));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < S; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < S; ++j) {
          if (causal && j > i) {
            p[j] = -std::numeric_limits<double>::infinity();
            continue;
          }
          double s = 0;
          for (int64_t e = 0; e < hd; ++e) {
            s += q[(b * S + i) * W + h * hd + e] * k[(b * S + j) * W + h * hd + e];
          }
          p[j] = s / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, p[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < S; ++j) {
          p[j] = std::exp(p[j] - mx);
          z += p[j];
        }
        for (int64_t e = 0; e < hd; ++e) {
          double s = 0;
          for (int64_t j = 0; j < S; ++j) s += p[j] / z * v[(b * S + j) * W + h * hd + e];
          o[(b * S + i) * W + h * hd + e] = s;
        }
      }
    }
  }
  return o;
}

inline double max_abs_diff(const Vec& a, const Vec& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace dtensor::testref
