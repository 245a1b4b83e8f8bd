#include "dtensor/tensor/compare.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace dtensor {

namespace {

void check_pair(const Tensor& a, const Tensor& b, const char* op) {
  DT_CHECK(a.defined(), "[%s] a is undefined", op);
  DT_CHECK(b.defined(), "[%s] b is undefined", op);
}

// Both tensors as contiguous float64 CPU data.
std::vector<double> as_doubles(const Tensor& t) {
  return t.to_vector<double>();
}

}  // namespace

bool equal(const Tensor& a, const Tensor& b) {
  check_pair(a, b, "equal");
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  Tensor ca = a.to(Device()).contiguous();
  Tensor cb = b.to(Device()).contiguous();
  if (a.dtype() == DType::kBool) {
    // Any nonzero byte is true: compare truth values, not bytes.
    const auto* pa = static_cast<const uint8_t*>(ca.data_ptr());
    const auto* pb = static_cast<const uint8_t*>(cb.data_ptr());
    for (int64_t i = 0; i < a.numel(); ++i) {
      if ((pa[i] != 0) != (pb[i] != 0)) return false;
    }
    return true;
  }
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  check_pair(a, b, "allclose");
  DT_CHECK(a.sizes() == b.sizes(), "[allclose] a has shape %s but b has shape %s",
           shape_str(a.sizes()), shape_str(b.sizes()));
  const std::vector<double> va = as_doubles(a);
  const std::vector<double> vb = as_doubles(b);
  for (size_t i = 0; i < va.size(); ++i) {
    const double x = va[i];
    const double y = vb[i];
    if (x == y) continue;  // includes equal infinities
    if (std::isnan(x) || std::isnan(y)) {
      if (equal_nan && std::isnan(x) && std::isnan(y)) continue;
      return false;
    }
    if (!std::isfinite(x) || !std::isfinite(y)) return false;
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) return false;
  }
  return true;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  check_pair(a, b, "max_abs_diff");
  DT_CHECK(a.sizes() == b.sizes(), "[max_abs_diff] a has shape %s but b has shape %s",
           shape_str(a.sizes()), shape_str(b.sizes()));
  const std::vector<double> va = as_doubles(a);
  const std::vector<double> vb = as_doubles(b);
  double m = 0.0;
  for (size_t i = 0; i < va.size(); ++i) {
    if (va[i] == vb[i]) continue;
    const double d = std::fabs(va[i] - vb[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::quiet_NaN();
    if (d > m) m = d;
  }
  return m;
}

}  // namespace dtensor
