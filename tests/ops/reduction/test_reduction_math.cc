// The composite reductions (reduction_math.cc): std, logsumexp, vector_norm, dist, any, all
// against references computed in double by the test, with the special values and errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "dtensor/autograd/engine.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using namespace dtensor::ewtest;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();
}  // namespace

TEST_CASE("std, logsumexp and vector norms match double references", "[reduction]") {
  // Rows of a [3, 4] tensor, reduced along dim 1, in every layout.
  const std::vector<double> v = {1, -2, 3, 0.5, -4, 0, 2, 2, 0.25, 1, -1, 3};
  std::vector<double> sd(3), lse(3), n1(3), n2(3), n3(3), ninf(3), nminf(3), n0(3);
  for (int r = 0; r < 3; ++r) {
    double mean = 0, s1 = 0, s2 = 0, s3 = 0, mx = 0, mn = kInf, e = 0, nz = 0;
    for (int k = 0; k < 4; ++k) mean += v[4 * r + k] / 4;
    for (int k = 0; k < 4; ++k) {
      const double x = v[4 * r + k], a = std::fabs(x);
      sd[r] += (x - mean) * (x - mean) / 3;
      e += std::exp(x);
      s1 += a;
      s2 += a * a;
      s3 += a * a * a;
      mx = std::max(mx, a);
      mn = std::min(mn, a);
      nz += x != 0;
    }
    sd[r] = std::sqrt(sd[r]);
    lse[r] = std::log(e);
    n1[r] = s1, n2[r] = std::sqrt(s2), n3[r] = std::cbrt(s3), ninf[r] = mx, nminf[r] = mn;
    n0[r] = nz;
  }
  for (DType d : {DType::kFloat64, DType::kFloat32}) {
    const double tol = d == DType::kFloat64 ? 1e-14 : 1e-6;
    for (const auto& [layout, t] : layouts(make(v, {3, 4}, d))) {
      INFO(dt::dtype_name(d) << " " << layout);
      check_values(dt::std(t, {1}), {3}, d, sd, tol, 0);
      check_values(dt::logsumexp(t, {1}), {3}, d, lse, tol, 0);
      check_values(dt::logsumexp(t, {1}, true), {3, 1}, d, lse, tol, 0);
      check_values(dt::vector_norm(t, 1, {1}), {3}, d, n1, tol, 0);
      check_values(dt::vector_norm(t, 2, {1}), {3}, d, n2, tol, 0);
      check_values(dt::vector_norm(t, 3, {1}, true), {3, 1}, d, n3, tol, 0);
      check_values(dt::vector_norm(t, kInf, {1}), {3}, d, ninf, 0, 0);
      check_values(dt::vector_norm(t, -kInf, {1}), {3}, d, nminf, 0, 0);
      check_values(dt::vector_norm(t, 0, {1}), {3}, d, n0, 0, 0);
    }
  }
  // dist: the 2-norm of the difference over every element, with broadcasting.
  const Tensor a = make({1, 2, 3, 4}, {2, 2}, DType::kFloat64);
  const Tensor b = make({1, 0}, {2}, DType::kFloat64);
  check_values(dt::dist(a, b), {}, DType::kFloat64, {std::sqrt(0 + 4 + 4 + 16)}, 1e-15, 0);
  check_values(dt::dist(a, b, 1), {}, DType::kFloat64, {0 + 2 + 2 + 4}, 0, 0);
}

TEST_CASE("logsumexp keeps infinities and empty reductions, integers give float", "[reduction]") {
  const Tensor x = make({-kInf, -kInf, kInf, 1, kNan, 0, 1000, 1000}, {4, 2}, DType::kFloat32);
  check_values(dt::logsumexp(x, {1}), {4}, DType::kFloat32,
               {-kInf, kInf, kNan, 1000 + std::log(2.0)}, 1e-6, 0);
  check_values(dt::logsumexp(dt::zeros({2, 0}), {1}), {2}, DType::kFloat32, {-kInf, -kInf}, 0, 0);
  const Tensor i = make({0, 0}, {2}, DType::kInt64);
  check_values(dt::logsumexp(i, {0}), {}, DType::kFloat32, {std::log(2.0)}, 1e-6, 0);
}

TEST_CASE("any and all test nonzero over dims, with the empty identities", "[reduction]") {
  const Tensor x = make({0, 0, 1, 0, 2, 3, kNan, 0}, {4, 2}, DType::kFloat32);
  for (const auto& [layout, t] : layouts(x)) {
    INFO(layout);
    check_values(dt::any(t, {1}), {4}, DType::kBool, {0, 1, 1, 1}, 0, 0);
    check_values(dt::all(t, {1}), {4}, DType::kBool, {0, 0, 1, 0}, 0, 0);
    check_values(dt::any(t, {0}, true), {1, 2}, DType::kBool, {1, 1}, 0, 0);
    check_values(dt::all(t), {}, DType::kBool, {0}, 0, 0);
  }
  const Tensor e = dt::zeros({0, 3}, DType::kInt32);
  check_values(dt::any(e, {0}), {3}, DType::kBool, {0, 0, 0}, 0, 0);
  check_values(dt::all(e, {0}), {3}, DType::kBool, {1, 1, 1}, 0, 0);
}

// Found by the PyTorch parity sweep (tests/ops/parity): the +-inf norm's gradient shares g among
// the elements equal to the norm, and a NaN element is the one selected, as PyTorch 2.15's: the
// other elements of a NaN norm get 0 (it was 0 / 0 = NaN for every element of that row). The
// gradient at the NaN itself is unspecified (PyTorch: 0). Expected values: PyTorch 2.15.
TEST_CASE("vector_norm +-inf: the gradient of a NaN norm is 0 off the NaN", "[reduction]") {
  for (const double ord : {kInf, -kInf}) {
    INFO("ord " << ord);
    dt::DTensor x = dt::local_dtensor(make({1, kNan, -3, 2, -5, 5}, {2, 3}, DType::kFloat64));
    x.requires_grad_();
    dt::autograd::backward({dt::sum(dt::vector_norm(x, ord, {1}))});
    const std::vector<double> g = x.grad().to_local().to_vector<double>();
    const std::vector<double> want = ord > 0 ? std::vector<double>{0, kNan, 0, 0, -0.5, 0.5}
                                             : std::vector<double>{0, kNan, 0, 1, 0, 0};
    for (size_t i = 0; i < g.size(); ++i) {
      if (i != 1) CHECK(g[i] == want[i]);
    }
  }
}

// Found by the PyTorch parity sweep: the norm of one element is |x| for every ord but 0, as
// PyTorch's (x * x overflowed: vector_norm of [1e300] was inf).
TEST_CASE("vector_norm of one element is its magnitude", "[reduction]") {
  const Tensor x = make({0, -1e300, 2}, {3, 1}, DType::kFloat64);
  for (const double ord : {2.0, 3.0, 0.5, 1.0, kInf, -kInf}) {
    INFO("ord " << ord);
    check_values(dt::vector_norm(x, ord, {1}), {3}, DType::kFloat64, {0, 1e300, 2}, 0, 0);
  }
  check_values(dt::vector_norm(x, 0, {1}), {3}, DType::kFloat64, {0, 1, 1}, 0, 0);
  check_values(dt::vector_norm(make({-3e20}, {1}, DType::kFloat32)), {}, DType::kFloat32, {3e20},
               1e-7, 0);
}

// Found by the PyTorch parity sweep (its float32 finite-specials variant): std takes the root of
// var's double-precision value before rounding, as PyTorch's kernel, so a float32 variance that
// overflows (9e76) leaves a finite std (it was sqrt(inf)); the DTensor op's kernel and std_mean
// too. Expected: PyTorch 2.15's torch.std of the same float32 values.
TEST_CASE("std of float32 values whose variance overflows float32 is finite", "[reduction]") {
  const Tensor x = make({3e38, -3e38, 1.0}, {3}, DType::kFloat32);
  check_values(dt::std(x), {}, DType::kFloat32, {3.0000000054977558e+38}, 0, 0);
  check_values(dt::std_mean(x).first, {}, DType::kFloat32, {3.0000000054977558e+38}, 0, 0);
  check_values(dt::std(dt::local_dtensor(x)).to_local(), {}, DType::kFloat32,
               {3.0000000054977558e+38}, 0, 0);
}

TEST_CASE("composite reduction errors name the op", "[reduction]") {
  const Tensor i = dt::zeros({2, 3}, DType::kInt64);
  REQUIRE_THROWS_WITH(dt::std(i), Catch::Contains("[std] expected a floating dtype"));
  REQUIRE_THROWS_WITH(dt::vector_norm(i), Catch::Contains("[vector_norm] expected a floating"));
  REQUIRE_THROWS_WITH(dt::vector_norm(dt::zeros({0, 2}), kInf, {0}),
                      Catch::Contains("[vector_norm] ord inf over zero elements"));
  REQUIRE_THROWS_WITH(dt::logsumexp(dt::zeros({2}), {1}), Catch::Contains("[logsumexp]"));
}
