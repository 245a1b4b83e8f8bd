#include <catch2/catch.hpp>
#include <cmath>

#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "test_util.h"

using namespace dtensor;
using namespace dtensor::test;
using Catch::Contains;

TEST_CASE("compare: equal is bitwise on same dtype and shape", "[compare]") {
  Tensor a = iota({3, 4});
  CHECK(equal(a, a.clone()));
  CHECK(equal(a.transpose(0, 1), a.transpose(0, 1).contiguous()));
  CHECK_FALSE(equal(a, a.to(kFloat64)));  // dtype differs
  CHECK_FALSE(equal(a, a.view({4, 3})));  // shape differs
  CHECK_FALSE(equal(a, a.transpose(0, 1)));
  Tensor b = a.clone();
  b.narrow(1, 3, 1).narrow(0, 2, 1).fill_(Scalar(100));
  CHECK_FALSE(equal(a, b));
  CHECK(equal(zeros({0, 3}), zeros({0, 3})));
  CHECK_FALSE(equal(zeros({0, 3}), zeros({3, 0})));
  CHECK(equal(full({}, 2.0), full({}, 2.0)));
  // NaN equals the same NaN; -0 differs from +0 bitwise.
  Tensor n = from_vector<float>({NAN, 1}, {2});
  CHECK(equal(n, n.clone()));
  CHECK_FALSE(equal(from_vector<float>({-0.0f}, {1}), from_vector<float>({0.0f}, {1})));
  CHECK(equal(from_vector<bool>({false, true}, {2}), iota({2}, kInt32).to(kBool)));
  CHECK(equal(full({2, 2}, 3, kBFloat16), full({1}, 3.0, kBFloat16).expand({2, 2})));
  REQUIRE_THROWS_WITH(equal(a, Tensor()), Contains("[equal] b is undefined"));
}

TEST_CASE("compare: allclose in double with tolerances", "[compare]") {
  Tensor a = from_vector<double>({1.0, 100.0, -3.0}, {3});
  Tensor b = from_vector<double>({1.0 + 1e-6, 100.0 + 5e-4, -3.0}, {3});
  CHECK(allclose(a, b, 1e-5, 1e-8));        // 5e-4 <= 1e-8 + 1e-5 * 100.0005
  CHECK_FALSE(allclose(a, b, 1e-6, 1e-8));  // 5e-4 > 1e-4
  CHECK(allclose(a, b, 0.0, 1e-3));
  CHECK_FALSE(allclose(a, b, 0.0, 1e-4));
  CHECK(allclose(a, a.to(kFloat32)));  // dtypes may differ
  CHECK(allclose(iota({2, 3}), iota({2, 3}, kInt64)));
  Tensor inf = from_vector<float>({INFINITY, -INFINITY}, {2});
  CHECK(allclose(inf, inf.clone()));
  CHECK_FALSE(allclose(inf, from_vector<float>({INFINITY, INFINITY}, {2})));
  CHECK_FALSE(allclose(inf, from_vector<float>({1e30f, -1e30f}, {2}), 1.0, 1e30));
  Tensor nan = from_vector<float>({NAN, 1}, {2});
  CHECK_FALSE(allclose(nan, nan));
  CHECK(allclose(nan, nan, 1e-5, 1e-8, true));
  CHECK_FALSE(allclose(nan, from_vector<float>({1, 1}, {2}), 1e-5, 1e-8, true));
  CHECK(allclose(zeros({0, 2}), zeros({0, 2}, kInt32)));
  CHECK(allclose(iota({3, 2}).transpose(0, 1), iota({3, 2}).transpose(0, 1).contiguous()));
  REQUIRE_THROWS_WITH(allclose(a, zeros({4})),
                      Contains("[allclose] a has shape [3] but b has shape [4]"));
}

TEST_CASE("compare: max_abs_diff", "[compare]") {
  Tensor a = from_vector<float>({1, 2, 3}, {3});
  Tensor b = from_vector<double>({1, 2.5, 1}, {3});
  CHECK(max_abs_diff(a, b) == 2.0);
  CHECK(max_abs_diff(a, a) == 0.0);
  CHECK(max_abs_diff(zeros({0}), zeros({0})) == 0.0);
  Tensor inf = from_vector<float>({INFINITY}, {1});
  CHECK(max_abs_diff(inf, inf) == 0.0);
  CHECK(std::isinf(max_abs_diff(inf, from_vector<float>({0}, {1}))));
  CHECK(std::isnan(max_abs_diff(from_vector<float>({NAN}, {1}), from_vector<float>({0}, {1}))));
  REQUIRE_THROWS_WITH(max_abs_diff(a, zeros({2})), Contains("[max_abs_diff]"));
}
