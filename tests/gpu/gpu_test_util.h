// Helpers of the CUDA op suites: deterministic inputs made on the CPU, and comparisons of a
// CUDA result with the CPU result of the same op.
//
// Tolerances (relative, plus a small absolute floor), documented per dtype: float64 1e-12;
// float32 1e-5 (CUDA's exp/log/tanh/erfc are within a few ulp of glibc's, and reductions add
// in a different order); float16 2e-3 and bfloat16 1e-2 (both compute in float and round once:
// one ulp of the 16-bit result, 2^-10 and 2^-7, when the float values differ in the last bit
// before rounding), each with an absolute floor of rtol / 10 for results near zero (inputs lie in
// [-3, 3)). Row kernels that accumulate in float (softmax, norms over hundreds of elements) and
// reductions over tens of thousands of elements pass rtol_scale 4. Integer, bool and
// data-movement results must be exact. Shapes with more than 65535 rows check the kernels that
// cap their grid and stride over the rest.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <vector>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/tensor.h"
#include "tests/common/tolerance.h"

namespace dtensor::gpu_test {

inline const Device kGpu(kCUDA, 0);

// Values in [lo, hi) from a fixed LCG (same on every run), as a CPU tensor of `dtype`
// (integers are truncated, bool is value > 0).
inline Tensor make_input(IntSpan shape, DType dtype, uint64_t seed, double lo = -3.0,
                         double hi = 3.0) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
  }
  return from_vector<double>(v, shape).to(dtype);
}

inline double rtol_for(DType d) {
  return test::rtol_for(d, 1e-5);
}

// The CUDA result `g` has the CPU result's shape and dtype, lives on the GPU, and its values
// match within rtol_for(dtype) (exactly for non-floating dtypes, NaN matching NaN).
inline void check_matches(const Tensor& g, const Tensor& c, double rtol_scale = 1.0) {
  REQUIRE(g.device().is_cuda());
  REQUIRE(g.sizes() == c.sizes());
  REQUIRE(g.dtype() == c.dtype());
  const std::vector<double> gv = g.to_vector<double>();
  const std::vector<double> cv = c.to_vector<double>();
  const double rtol = rtol_for(c.dtype()) * rtol_scale;
  const double atol = rtol * 0.1;  // for results near 0 after cancellation (log_softmax)
  int64_t bad = 0;
  for (size_t i = 0; i < gv.size(); ++i) {
    const double a = gv[i], b = cv[i];
    const bool ok = (std::isnan(a) && std::isnan(b)) || a == b ||
                    std::fabs(a - b) <= atol + rtol * std::fabs(b);
    if (!ok && bad++ < 5) {
      UNSCOPED_INFO("element " << i << ": cuda " << a << " vs cpu " << b);
    }
  }
  CHECK(bad == 0);
}

// Bit-exact comparison (data movement).
inline void check_exact(const Tensor& g, const Tensor& c) {
  REQUIRE(g.device().is_cuda());
  REQUIRE(g.sizes() == c.sizes());
  REQUIRE(g.dtype() == c.dtype());
  const Tensor gc = g.to(Device()).contiguous();
  const Tensor cc = c.contiguous();
  const std::vector<double> gv = gc.to_vector<double>();
  const std::vector<double> cv = cc.to_vector<double>();
  int64_t bad = 0;
  for (size_t i = 0; i < gv.size(); ++i) {
    if (!(gv[i] == cv[i] || (std::isnan(gv[i]) && std::isnan(cv[i]))) && bad++ < 5) {
      UNSCOPED_INFO("element " << i << ": cuda " << std::setprecision(17) << gv[i] << " vs cpu "
                               << cv[i] << " (" << dtype_name(c.dtype()) << " "
                               << shape_str(c.sizes()) << ")");
    }
  }
  CHECK(bad == 0);
}

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> d = {kFloat32, kFloat64, kFloat16, kBFloat16,
                                       kInt32,   kInt64,   kBool};
  return d;
}
inline const std::vector<DType>& floating_dtypes() {
  static const std::vector<DType> d = {kFloat32, kFloat64, kFloat16, kBFloat16};
  return d;
}

}  // namespace dtensor::gpu_test
