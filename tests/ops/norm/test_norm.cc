#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/norm/norm.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using dt::test::check_close;
using dt::test::rand_tensor;
using dt::test::rtol_for;

namespace {

// Reference in double over contiguous slices of n trailing elements.
std::vector<double> ref_norm(const Tensor& x, int64_t n, const Tensor& w, const Tensor& b,
                             double eps, bool rms) {
  const auto v = x.to_vector<double>();
  const auto wv = w.defined() ? w.to_vector<double>() : std::vector<double>();
  const auto bv = b.defined() ? b.to_vector<double>() : std::vector<double>();
  std::vector<double> out(v.size());
  for (size_t r = 0; n > 0 && r < v.size() / n; ++r) {
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t i = 0; i < n; ++i) mean += v[r * n + i];
      mean /= n;
    }
    for (int64_t i = 0; i < n; ++i) var += (v[r * n + i] - mean) * (v[r * n + i] - mean);
    var /= n;  // biased
    for (int64_t i = 0; i < n; ++i) {
      double y = (v[r * n + i] - mean) / std::sqrt(var + eps);
      if (!wv.empty()) y *= wv[i];
      if (!bv.empty()) y += bv[i];
      out[r * n + i] = y;
    }
  }
  return out;
}

// Normalised outputs are O(1); 16-bit results carry one output rounding plus the rounding of
// their inputs' statistics in float.
double norm_tol(DType d) {
  return 2 * rtol_for(d);
}

}  // namespace

TEST_CASE("layer_norm matches a reference with and without affine parameters") {
  using S = std::vector<int64_t>;
  const auto [xs, ns] = GENERATE(std::make_pair(S{4, 6}, S{6}), std::make_pair(S{2, 3, 4}, S{3, 4}),
                                 std::make_pair(S{5}, S{5}), std::make_pair(S{0, 6}, S{6}),
                                 std::make_pair(S{3, 1}, S{1}), std::make_pair(S{2, 7}, S{}));
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16}) {
    for (bool affine : {false, true}) {
      INFO(dt::dtype_name(d) << " x " << dt::shape_str(xs) << " normalized " << dt::shape_str(ns)
                             << " affine " << affine);
      const Tensor x = rand_tensor(xs, d, 1, -3, 5);
      const Tensor w = affine ? rand_tensor(ns, d, 2, 0.5, 2) : Tensor();
      const Tensor b = affine ? rand_tensor(ns, d, 3) : Tensor();
      const Tensor y = dt::layer_norm(x, ns, w, b, 1e-5);
      CHECK(y.dtype() == d);
      check_close(y, xs, ref_norm(x, dt::shape_numel(ns), w, b, 1e-5, false), norm_tol(d),
                  norm_tol(d));
    }
  }
}

TEST_CASE("layer_norm takes non-contiguous inputs and its eps matters") {
  const Tensor x = rand_tensor({6, 4}, dt::kFloat64, 4).transpose(0, 1);  // [4, 6]
  check_close(dt::layer_norm(x, {6}), {4, 6}, ref_norm(x, 6, {}, {}, 1e-5, false), 1e-12, 1e-12);
  // A constant-ish row: var is tiny, eps dominates.
  const Tensor c = dt::from_vector<double>({1.0, 1.0 + 1e-4, 1.0, 1.0 - 1e-4}, {1, 4});
  check_close(dt::layer_norm(c, {4}, {}, {}, 1e-2), {1, 4}, ref_norm(c, 4, {}, {}, 1e-2, false),
              1e-12, 1e-14);
}

TEST_CASE("rms_norm matches a reference, eps = nullopt is the compute type's epsilon") {
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16}) {
    INFO(dt::dtype_name(d));
    const Tensor x = rand_tensor({3, 2, 5}, d, 5, -2, 2);
    const Tensor w = rand_tensor({2, 5}, d, 6, 0.5, 1.5);
    check_close(dt::rms_norm(x, {2, 5}, w, 1e-6), {3, 2, 5}, ref_norm(x, 10, w, {}, 1e-6, true),
                norm_tol(d), norm_tol(d));
    check_close(dt::rms_norm(x, {5}), {3, 2, 5}, ref_norm(x, 5, {}, {}, 0.0, true), norm_tol(d),
                norm_tol(d));
  }
  // Tiny inputs: mean(x^2) = 1e-8, so the default eps (float: 1.19e-7, double: 2.2e-16) shows.
  const Tensor tiny = dt::full({1, 4}, 1e-4, dt::kFloat64);
  const double feps = std::numeric_limits<float>::epsilon();
  const double deps = std::numeric_limits<double>::epsilon();
  check_close(dt::rms_norm(tiny, {4}), {1, 4}, ref_norm(tiny, 4, {}, {}, deps, true), 1e-12);
  const Tensor tiny32 = tiny.to(dt::kFloat32);
  check_close(dt::rms_norm(tiny32, {4}), {1, 4}, ref_norm(tiny32, 4, {}, {}, feps, true), 1e-5);
  const Tensor tiny16 = tiny.to(dt::kBFloat16);
  check_close(dt::rms_norm(tiny16, {4}), {1, 4}, ref_norm(tiny16, 4, {}, {}, feps, true), 1e-2);
  check_close(dt::rms_norm(dt::zeros({0, 3}), {3}), {0, 3}, {}, 0.0);
}

TEST_CASE("norm errors name the op, the shapes and the argument") {
  using Catch::Contains;
  REQUIRE_THROWS_WITH(dt::layer_norm(dt::zeros({2, 3}), {4}),
                      Contains("[layer_norm] normalized_shape [4] does not match the trailing "
                               "dims of input [2, 3]"));
  REQUIRE_THROWS_WITH(dt::layer_norm(dt::zeros({3}), {2, 3}), Contains("[layer_norm]"));
  REQUIRE_THROWS_WITH(dt::layer_norm(dt::zeros({2, 3}), {3}, dt::zeros({4})),
                      Contains("[layer_norm] weight of shape [4] does not match normalized_shape "
                               "[3]"));
  REQUIRE_THROWS_WITH(
      dt::layer_norm(dt::zeros({2, 3}), {3}, Tensor(), dt::zeros({3}, dt::kFloat64)),
      Contains("[layer_norm] bias must have the input's dtype"));
  REQUIRE_THROWS_WITH(dt::rms_norm(dt::zeros({2, 3}, dt::kInt32), {3}),
                      Contains("[rms_norm] expected a floating dtype"));
  REQUIRE_THROWS_AS(dt::rms_norm(dt::zeros({2, 3}), {2}), dt::Error);
}
