// CPU batch_norm_sums and its backward: per channel, the float64 sums of x and x^2 over the
// batch and spatial elements (four partial accumulators per sum, so the loop pipelines), and
// the elementwise gradient.
#include "dtensor/ops/norm/detail/batch_norm_kernels.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {
namespace {

template <typename T>
void sums(const T* x, int64_t n, int64_t c, int64_t l, double* out) {
  for (int64_t k = 0; k < c; ++k) {
    double s[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n; ++i) {
      const T* p = x + (i * c + k) * l;
      int64_t j = 0;
      for (; j + 4 <= l; j += 4) {
        for (int u = 0; u < 4; ++u) {
          const double v = static_cast<double>(p[j + u]);
          s[u] += v;
          q[u] += v * v;
        }
      }
      for (; j < l; ++j) {
        const double v = static_cast<double>(p[j]);
        s[0] += v;
        q[0] += v * v;
      }
    }
    out[k] = (s[0] + s[1]) + (s[2] + s[3]);
    out[c + k] = (q[0] + q[1]) + (q[2] + q[3]);
  }
}

template <typename T>
void sums_backward(const double* g, const T* x, int64_t n, int64_t c, int64_t l, T* gx) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < c; ++k) {
      const double a = g[k], b = 2 * g[c + k];
      const int64_t o = (i * c + k) * l;
      for (int64_t j = 0; j < l; ++j) {
        gx[o + j] = static_cast<T>(a + b * static_cast<double>(x[o + j]));
      }
    }
  }
}

}  // namespace

void batch_norm_sums_cpu(const Tensor& x, int64_t n, int64_t c, int64_t l, const Tensor& out) {
  auto* o = static_cast<double*>(out.data_ptr());
  if (x.dtype() == kFloat64) {
    sums(static_cast<const double*>(x.data_ptr()), n, c, l, o);
  } else {
    DT_CHECK(x.dtype() == kFloat32, "[batch_norm_sums] unexpected dtype %s", dtype_name(x.dtype()));
    sums(static_cast<const float*>(x.data_ptr()), n, c, l, o);
  }
}

void batch_norm_sums_backward_cpu(const Tensor& g, const Tensor& x, int64_t n, int64_t c, int64_t l,
                                  const Tensor& gx) {
  const auto* gp = static_cast<const double*>(g.data_ptr());
  if (x.dtype() == kFloat64) {
    sums_backward(gp, static_cast<const double*>(x.data_ptr()), n, c, l,
                  static_cast<double*>(gx.data_ptr()));
  } else {
    sums_backward(gp, static_cast<const float*>(x.data_ptr()), n, c, l,
                  static_cast<float*>(gx.data_ptr()));
  }
}

}  // namespace dtensor::detail
