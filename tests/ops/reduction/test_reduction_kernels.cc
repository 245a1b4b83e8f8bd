// The vectorised reduction kernels (contiguous runs of floating inputs, every compiled SIMD
// target) against float64 references: run lengths around the vector width and the kernels'
// minimum length, NaN anywhere in a run, and the outer (whole-row) accumulation.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/reduction/reduction.h"
#include "tests/ops/common/ew_test_util.h"
#include "tests/ops/common/simd_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using dt::test::for_each_simd_target;
namespace ew = dt::ewtest;

namespace {

const DType kFloating[] = {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16};

// Row r of a [rows, n] row-major vector: sum, mean, var (correction 1), max, min in double.
struct RowStats {
  double sum = 0, mean = 0, var = 0, max = -INFINITY, min = INFINITY;
};

RowStats row_stats(const std::vector<double>& v, int64_t r, int64_t n) {
  RowStats s;
  for (int64_t i = 0; i < n; ++i) {
    const double x = v[r * n + i];
    s.sum += x;
    s.max = std::isnan(s.max) || std::isnan(x) ? NAN : std::max(s.max, x);
    s.min = std::isnan(s.min) || std::isnan(x) ? NAN : std::min(s.min, x);
  }
  s.mean = s.sum / n;
  for (int64_t i = 0; i < n; ++i) s.var += (v[r * n + i] - s.mean) * (v[r * n + i] - s.mean);
  s.var /= n - 1;
  return s;
}

}  // namespace

TEST_CASE("vectorised row reductions match float64 on odd lengths, every dtype and SIMD target",
          "[reduction][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : kFloating) {
      for (int64_t n : {2, 15, 16, 17, 33, 100, 1001, 4097}) {
        INFO(dt::dtype_name(d) << " n = " << n);
        const int64_t rows = 3;
        std::vector<double> v = ew::random_values(rows * n, d, static_cast<uint32_t>(n), 1, 3);
        if (n > 2) v[2 * n + n - 1] = NAN;  // row 2: NaN in the last (tail) element
        const Tensor x = ew::make(v, {rows, n}, d);
        std::vector<double> sum, mean, var, mx, mn;
        for (int64_t r = 0; r < rows; ++r) {
          const RowStats s = row_stats(v, r, n);
          sum.push_back(s.sum);
          mean.push_back(s.mean);
          var.push_back(s.var);
          mx.push_back(s.max);
          mn.push_back(s.min);
        }
        const double tol = ew::rtol_for(d);
        ew::check_values(dt::sum(x, {1}), {rows}, d, sum, tol, 0);
        ew::check_values(dt::mean(x, {1}), {rows}, d, mean, tol, 0);
        ew::check_values(dt::var(x, {1}), {rows}, d, var, tol, tol * 1e-3);
        // max / min are exact (no rounding).
        ew::check_values(dt::amax(x, {1}), {rows}, d, mx, 0, 0);
        ew::check_values(dt::amin(x, {1}), {rows}, d, mn, 0, 0);
      }
    }
  });
}

TEST_CASE("vectorised max and min find NaN at every position of a run", "[reduction][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : {dt::kFloat32, dt::kFloat64}) {
      const int64_t n = 37;
      for (int64_t pos = 0; pos < n; ++pos) {
        std::vector<double> v = ew::random_values(n, d, 9, -5, 5);
        v[pos] = NAN;
        const Tensor x = ew::make(v, {n}, d);
        INFO(dt::dtype_name(d) << " NaN at " << pos);
        CHECK(std::isnan(dt::amax(x).to_vector<double>()[0]));
        CHECK(std::isnan(dt::amin(x).to_vector<double>()[0]));
      }
      // Infinities are ordinary extremes.
      const Tensor y =
          ew::make({1, -INFINITY, 3, INFINITY, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {17}, d);
      CHECK(dt::amax(y).to_vector<double>()[0] == INFINITY);
      CHECK(dt::amin(y).to_vector<double>()[0] == -INFINITY);
    }
  });
}

TEST_CASE("vectorised outer reductions (sum over a leading dim) match float64",
          "[reduction][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : kFloating) {
      for (int64_t k : {16, 17, 31, 100}) {
        const int64_t rows = 9;
        INFO(dt::dtype_name(d) << " k = " << k);
        const std::vector<double> v = ew::random_values(rows * k, d, 13, -2, 2);
        const Tensor x = ew::make(v, {rows, k}, d);
        std::vector<double> sum(k, 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < k; ++j) sum[j] += v[r * k + j];
        }
        std::vector<double> mean = sum;
        for (double& m : mean) m /= rows;
        ew::check_values(dt::sum(x, {0}), {k}, d, sum, ew::rtol_for(d), 1e-12);
        ew::check_values(dt::mean(x, {0}), {k}, d, mean, ew::rtol_for(d), 1e-12);
      }
    }
  });
}
