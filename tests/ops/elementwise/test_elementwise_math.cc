// The pointwise math of elementwise_math.cc on local tensors: integer semantics (signs of fmod
// and remainder, integer pow, bitwise ops), clamp, nan_to_num, the float predicates, logical
// ops, lerp, addcmul / addcdiv and their errors, against values worked out by hand or computed
// in double by the test. (Float binary math over dtypes, layouts and broadcasting is in
// test_elementwise.cc; sharding, gradients and finite differences come from the registry's
// samples in the harness tests.)
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <limits>

#include "dtensor/autograd/engine.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using namespace dtensor::ewtest;

namespace {
const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEMPLATE_TEST_CASE("integer fmod, remainder, pow and bitwise ops are exact", "[elementwise]",
                   int32_t, int64_t) {
  const DType d = dt::dtype_of_v<TestType>;
  const Tensor a = make({7, -7, 7, -7, 0, 5}, {6}, d);
  const Tensor b = make({3, 3, -3, -3, 2, 1}, {6}, d);
  for (const auto& [layout, t] : layouts(make({7, -7, 7, -7, 0, 5}, {2, 3}, d))) {
    INFO(layout);
    check_values(dt::fmod(t, dt::Scalar(int64_t{3})), {2, 3}, d, {1, -1, 1, -1, 0, 2}, 0, 0);
    check_values(dt::remainder(t, dt::Scalar(int64_t{-3})), {2, 3}, d, {-2, -1, -2, -1, 0, -1}, 0,
                 0);
  }
  check_values(dt::fmod(a, b), {6}, d, {1, -1, 1, -1, 0, 0}, 0, 0);       // sign of a
  check_values(dt::remainder(a, b), {6}, d, {1, 2, -2, -1, 0, 0}, 0, 0);  // sign of b
  // Integer pow: negative exponents give 1 / x^|e| truncated (1, +-1 for -1, else 0).
  const Tensor base = make({2, -1, -1, 1, 3, 0}, {6}, d);
  const Tensor e = make({10, 3, -3, -5, -1, 0}, {6}, d);
  check_values(dt::pow(base, e), {6}, d, {1024, -1, -1, 1, 0, 1}, 0, 0);
  const Tensor x = make({12, -1, 0, 5}, {4}, d);
  const Tensor y = make({10, 6, 7, 5}, {4}, d);
  check_values(dt::bitwise_and(x, y), {4}, d, {8, 6, 0, 5}, 0, 0);
  check_values(dt::bitwise_or(x, y), {4}, d, {14, -1, 7, 5}, 0, 0);
  check_values(dt::bitwise_xor(x, y), {4}, d, {6, -7, 7, 0}, 0, 0);
  check_values(dt::bitwise_not(x), {4}, d, {-13, 0, -1, -6}, 0, 0);
  // The most negative value by -1 is 0 (no overflow trap).
  const Tensor lowest = make({-2147483648.0}, {1}, DType::kInt32);
  check_values(dt::fmod(lowest, make({-1}, {1}, DType::kInt32)), {1}, DType::kInt32, {0}, 0, 0);
  check_values(dt::remainder(lowest, dt::Scalar(int64_t{-1})), {1}, DType::kInt32, {0}, 0, 0);
  // Division by zero raises for integers only.
  REQUIRE_THROWS_WITH(dt::fmod(a, make({1, 0, 2, 0, 1, 1}, {6}, d)),
                      Catch::Contains("[fmod] integer division by zero (2 zero elements"));
  REQUIRE_THROWS_WITH(dt::remainder(a, dt::Scalar(int64_t{0})),
                      Catch::Contains("[remainder] integer division by zero"));
  check_values(dt::fmod(make({1, -1}, {2}, DType::kFloat32), make({0, 0}, {2}, DType::kFloat32)),
               {2}, DType::kFloat32, {kNan, kNan}, 0, 0);
}

TEST_CASE("bitwise and logical ops on bool, predicates on every dtype", "[elementwise]") {
  const Tensor p = make({1, 1, 0, 0}, {4}, DType::kBool);
  const Tensor q = make({1, 0, 1, 0}, {4}, DType::kBool);
  check_values(dt::bitwise_and(p, q), {4}, DType::kBool, {1, 0, 0, 0}, 0, 0);
  check_values(dt::bitwise_or(p, q), {4}, DType::kBool, {1, 1, 1, 0}, 0, 0);
  check_values(dt::bitwise_xor(p, q), {4}, DType::kBool, {0, 1, 1, 0}, 0, 0);
  check_values(dt::bitwise_not(p), {4}, DType::kBool, {0, 0, 1, 1}, 0, 0);
  // Logical ops test nonzero on any dtype (NaN is true) and broadcast.
  const Tensor f = make({2.5, 0, kNan, -1}, {4}, DType::kFloat32);
  const Tensor i = make({0, 3}, {2, 1}, DType::kInt64);
  check_values(dt::logical_not(f), {4}, DType::kBool, {0, 1, 0, 0}, 0, 0);
  check_values(dt::logical_and(f, i), {2, 4}, DType::kBool, {0, 0, 0, 0, 1, 0, 1, 1}, 0, 0);
  check_values(dt::logical_or(f, i), {2, 4}, DType::kBool, {1, 0, 1, 1, 1, 1, 1, 1}, 0, 0);
  check_values(dt::logical_xor(f, i), {2, 4}, DType::kBool, {1, 0, 1, 1, 0, 1, 0, 0}, 0, 0);
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    INFO(dt::dtype_name(d));
    const Tensor v = make({1.5, kNan, kInf, -kInf, 0}, {5}, d);
    check_values(dt::isnan(v), {5}, DType::kBool, {0, 1, 0, 0, 0}, 0, 0);
    check_values(dt::isinf(v), {5}, DType::kBool, {0, 0, 1, 1, 0}, 0, 0);
    check_values(dt::isposinf(v), {5}, DType::kBool, {0, 0, 1, 0, 0}, 0, 0);
    check_values(dt::isneginf(v), {5}, DType::kBool, {0, 0, 0, 1, 0}, 0, 0);
    check_values(dt::isfinite(v), {5}, DType::kBool, {1, 0, 0, 0, 1}, 0, 0);
  }
  const Tensor n = make({-4, 9}, {2}, DType::kInt32);
  check_values(dt::isnan(n), {2}, DType::kBool, {0, 0}, 0, 0);
  check_values(dt::isfinite(n), {2}, DType::kBool, {1, 1}, 0, 0);
  check_values(dt::isinf(p), {4}, DType::kBool, {0, 0, 0, 0}, 0, 0);
}

TEST_CASE("clamp: scalar and tensor bounds, promotion, NaN, min above max", "[elementwise]") {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    INFO(dt::dtype_name(d));
    for (const auto& [layout, t] : layouts(make({-3, -0.5, 0.25, 2, kNan, 7}, {2, 3}, d))) {
      INFO(layout);
      check_values(dt::clamp(t, -1.0, 1.0), {2, 3}, d, {-1, -0.5, 0.25, 1, kNan, 1}, 0, 0);
      check_values(dt::clamp_min(t, 0.0), {2, 3}, d, {0, 0, 0.25, 2, kNan, 7}, 0, 0);
      check_values(dt::clamp_max(t, 0.0), {2, 3}, d, {-3, -0.5, 0, 0, kNan, 0}, 0, 0);
      check_values(dt::clip(t, 3.0, -3.0), {2, 3}, d, {-3, -3, -3, -3, kNan, -3}, 0, 0);
    }
  }
  // Integers keep their dtype under integer bounds and promote under floating ones.
  const Tensor i = make({-5, 0, 5}, {3}, DType::kInt32);
  const Tensor ci = dt::clamp(i, dt::Scalar(int64_t{-2}), dt::Scalar(int64_t{3}));
  check_values(ci, {3}, DType::kInt32, {-2, 0, 3}, 0, 0);
  const Tensor cf = dt::clamp(i, std::nullopt, dt::Scalar(0.5));
  check_values(cf, {3}, DType::kFloat32, {-5, 0, 0.5}, 0, 0);
  // Tensor bounds broadcast: min per column, max per row.
  const Tensor x = make({-3, 0, 3, -3, 0, 3}, {2, 3}, DType::kFloat64);
  const Tensor lo = make({-1, 1, -5}, {3}, DType::kFloat64);
  const Tensor hi = make({2, 0.5}, {2, 1}, DType::kFloat64);
  check_values(dt::clamp(x, lo, hi), {2, 3}, DType::kFloat64, {-1, 1, 2, -1, 0.5, 0.5}, 0, 0);
  REQUIRE_THROWS_WITH(dt::clamp(x, std::nullopt, std::nullopt),
                      Catch::Contains("[clamp] at least one of min and max"));
  REQUIRE_THROWS_WITH(dt::clamp(make({1}, {1}, DType::kBool), 0.0, 1.0),
                      Catch::Contains("[clamp] argument self has dtype bool"));
}

TEST_CASE("nan_to_num replaces NaN and infinities per dtype", "[elementwise]") {
  const std::vector<double> v = {kNan, kInf, -kInf, 1.5};
  check_values(dt::nan_to_num(make(v, {4}, DType::kFloat32)), {4}, DType::kFloat32,
               {0, FLT_MAX, -FLT_MAX, 1.5}, 0, 0);
  check_values(dt::nan_to_num(make(v, {4}, DType::kFloat64)), {4}, DType::kFloat64,
               {0, DBL_MAX, -DBL_MAX, 1.5}, 0, 0);
  check_values(dt::nan_to_num(make(v, {4}, DType::kFloat16)), {4}, DType::kFloat16,
               {0, 65504, -65504, 1.5}, 0, 0);
  check_values(dt::nan_to_num(make(v, {4}, DType::kFloat64), -1, 10, -20), {4}, DType::kFloat64,
               {-1, 10, -20, 1.5}, 0, 0);
  // A replacement the dtype cannot hold saturates as the dtype's conversion does.
  check_values(dt::nan_to_num(make(v, {4}, DType::kFloat16), 0, 1e10), {4}, DType::kFloat16,
               {0, kInf, -65504, 1.5}, 0, 0);
  const Tensor n = make({3, -4}, {2}, DType::kInt64);
  check_values(dt::nan_to_num(n), {2}, DType::kInt64, {3, -4}, 0, 0);
}

TEST_CASE("square, lerp, addcmul and addcdiv match double references", "[elementwise]") {
  const std::vector<double> a = random_values(12, DType::kFloat64, 3);
  const std::vector<double> b = random_values(12, DType::kFloat64, 4);
  const std::vector<double> w = random_values(4, DType::kFloat64, 5, 0, 1);
  std::vector<double> sq(12), ls(12), lt(12), cm(12), cd(12);
  for (int64_t k = 0; k < 12; ++k) {
    const double wk = w[k % 4];
    sq[k] = a[k] * a[k];
    ls[k] = a[k] + 0.25 * (b[k] - a[k]);
    lt[k] = a[k] + wk * (b[k] - a[k]);
    cm[k] = a[k] + 0.5 * b[k] * wk;
    cd[k] = a[k] + 0.5 * b[k] / (wk + 1);
  }
  const Tensor ta = make(a, {3, 4}, DType::kFloat64), tb = make(b, {3, 4}, DType::kFloat64);
  const Tensor tw = make(w, {4}, DType::kFloat64);
  check_values(dt::square(ta), {3, 4}, DType::kFloat64, sq, 1e-15, 0);
  check_values(dt::lerp(ta, tb, 0.25), {3, 4}, DType::kFloat64, ls, 1e-14, 1e-15);
  check_values(dt::lerp(ta, tb, tw), {3, 4}, DType::kFloat64, lt, 1e-14, 1e-15);
  check_values(dt::addcmul(ta, tb, tw, 0.5), {3, 4}, DType::kFloat64, cm, 1e-14, 1e-15);
  check_values(dt::addcdiv(ta, tb, tw + 1.0, 0.5), {3, 4}, DType::kFloat64, cd, 1e-14, 1e-15);
  check_values(dt::square(make({-3, 4}, {2}, DType::kInt32)), {2}, DType::kInt32, {9, 16}, 0, 0);
  // bool: square is int64 and sign the bool itself, as PyTorch's (both raised).
  check_values(dt::square(make({1, 0}, {2}, DType::kBool)), {2}, DType::kInt64, {1, 0}, 0, 0);
  check_values(dt::sign(make({1, 0}, {2}, DType::kBool)), {2}, DType::kBool, {1, 0}, 0, 0);
  // Integers with a floating value: the value is truncated and the result stays int64, as
  // PyTorch's (tests/ops/torch_grad_conventions.py); it was a float32 product, refused on
  // DTensors ("local kernel returned [2] float32 ... expected int64").
  const Tensor i1 = make({1, 2}, {2}, DType::kInt64), i2 = make({3, 4}, {2}, DType::kInt64);
  const Tensor i3 = make({2, 2}, {2}, DType::kInt64);
  check_values(dt::addcmul(i1, i2, i3, 0.5), {2}, DType::kInt64, {1, 2}, 0, 0);
  check_values(dt::addcmul(i1, i2, i3, 1.5), {2}, DType::kInt64, {7, 10}, 0, 0);
  check_values(dt::addcmul(i1, i2, i3, -1.5), {2}, DType::kInt64, {-5, -6}, 0, 0);
  const dt::DTensor d =
      dt::addcmul(dt::local_dtensor(i1), dt::local_dtensor(i2), dt::local_dtensor(i3), 1.5);
  check_values(d.to_local(), {2}, DType::kInt64, {7, 10}, 0, 0);
}

// Found by the PyTorch parity sweep (tests/ops/parity): lerp takes PyTorch's formula, end - (end -
// start) (1 - w) for |w| >= 0.5 (start + (end - start) w lost a small end beside start: lerp(1,
// 1e-20, 1) was 0; an infinite end - start gives NaN as PyTorch's), and hypot's gradient g x / h
// multiplies before dividing (g / h overflowed for a subnormal h: inf, and NaN for y = 0).
// Expected values: PyTorch 2.15.
TEST_CASE("lerp at large weights, hypot's and div's gradients at extremes match PyTorch",
          "[elementwise]") {
  const Tensor start = make({1.0, 0.1, -0.0}, {3}, DType::kFloat64);
  const Tensor end = make({1e-20, 0.3, kInf}, {3}, DType::kFloat64);
  check_values(dt::lerp(start, end, 1.0), {3}, DType::kFloat64, {1e-20, 0.3, kNan}, 0, 0);
  check_values(dt::lerp(start, end, make({1.0, 1.0, 0.25}, {3}, DType::kFloat64)), {3},
               DType::kFloat64, {1e-20, 0.3, kInf}, 0, 0);
  dt::DTensor x = dt::local_dtensor(make({1e-310, 3.0}, {2}, DType::kFloat64));
  dt::DTensor y = dt::local_dtensor(make({0.0, 4.0}, {2}, DType::kFloat64));
  x.requires_grad_();
  y.requires_grad_();
  dt::autograd::backward({dt::sum(dt::hypot(x, y))});
  check_values(x.grad().to_local(), {2}, DType::kFloat64, {1.0, 0.6}, 1e-15, 0);
  check_values(y.grad().to_local(), {2}, DType::kFloat64, {0.0, 0.8}, 1e-15, 0);
  // div's divisor gradient -g (a / b) / b in PyTorch's order: b * b overflowed float32 here (0
  // instead of PyTorch's -3.3e-39).
  dt::DTensor a = dt::local_dtensor(make({3e38, 2.0}, {2}, DType::kFloat32));
  dt::DTensor b = dt::local_dtensor(make({-3e38, 4.0}, {2}, DType::kFloat32));
  b.requires_grad_();
  dt::autograd::backward({dt::sum(dt::div(a, b))});
  check_values(b.grad().to_local(), {2}, DType::kFloat32, {-3.333333116818801e-39, -0.125}, 0, 0);
}

TEST_CASE("pointwise math errors name the op and the argument", "[elementwise]") {
  const Tensor f = dt::zeros({2});
  const Tensor i = dt::zeros({2}, DType::kInt64);
  const Tensor bl = dt::zeros({2}, DType::kBool);
  REQUIRE_THROWS_WITH(dt::bitwise_and(f, i),
                      Catch::Contains("[bitwise_and] argument self has dtype float32, expected an "
                                      "integer or bool dtype"));
  REQUIRE_THROWS_WITH(dt::bitwise_not(f), Catch::Contains("[bitwise_not]"));
  REQUIRE_THROWS_WITH(dt::fmod(bl, bl), Catch::Contains("[fmod] argument self has dtype bool"));
  REQUIRE_THROWS_WITH(dt::hypot(i, i), Catch::Contains("[hypot] argument self has dtype int64"));
  REQUIRE_THROWS_WITH(dt::lerp(f, i, 0.5), Catch::Contains("[lerp] argument end has dtype int64"));
  REQUIRE_THROWS_WITH(dt::addcdiv(f, i, i), Catch::Contains("[addcdiv] integer division"));
  REQUIRE_THROWS_WITH(dt::atan2(f, dt::zeros({3})), Catch::Contains("[atan2] cannot broadcast"));
  check_values(dt::atan2(i, i + 1), {2}, DType::kFloat32, {0, 0}, 0, 0);  // integers -> float
}

TEST_CASE("erfinv: reference values, the edges, and erf(erfinv(x)) == x", "[elementwise]") {
  // Reference values of the inverse error function (to 16 digits).
  const std::vector<double> x{0.0, 0.5, -0.9, 0.999, -0.25, 1e-10, 1.0, -1.0, 1.5, kNan};
  const std::vector<double> y{0.0,
                              0.4769362762044699,
                              -1.1630871536766743,
                              2.3267537655135246,
                              -0.2253120550121781,
                              8.862269254527580e-11,
                              kInf,
                              -kInf,
                              kNan,
                              kNan};
  check_values(dt::erfinv(make(x, {10}, DType::kFloat64)), {10}, DType::kFloat64, y, 1e-14, 1e-300);
  check_values(dt::erfinv(make(x, {10}, DType::kFloat32)), {10}, DType::kFloat32, y, 2e-6, 1e-30);
  // Integers give float32, as erf.
  check_values(dt::erfinv(make({0, 1}, {2}, DType::kInt64)), {2}, DType::kFloat32, {0, kInf}, 0, 0);
  // Round trip over (-1, 1), close to the ends included.
  std::vector<double> v;
  for (int i = -999; i <= 999; i += 37) v.push_back(i / 1000.0);
  v.push_back(1 - 1e-12);
  v.push_back(-1 + 1e-9);
  const Tensor t = make(v, {static_cast<int64_t>(v.size())}, DType::kFloat64);
  check_values(dt::erf(dt::erfinv(t)), t.sizes(), DType::kFloat64, v, 1e-15, 1e-16);
}
