// The vectorised transcendental and activation kernels (every compiled SIMD target) against
// float64 references: sizes that are not multiples of the vector width, special values, every
// floating dtype and memory layout; and the activation backward kernels against central finite
// differences in float64.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/tensor/creation.h"
#include "tests/ops/common/ew_test_util.h"
#include "tests/ops/common/simd_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using dt::test::for_each_simd_target;
namespace ew = dt::ewtest;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

const DType kFloating[] = {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16};

double sigmoid_ref(double x) {
  return 1 / (1 + std::exp(-x));
}
double gelu_ref(double x) {
  return 0.5 * x * std::erfc(-x * 0.70710678118654752440);
}
double gelu_tanh_ref(double x) {
  const double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
  return x / (1 + std::exp(-2 * u));
}
double silu_ref(double x) {
  return x / (1 + std::exp(-x));
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  double (*ref)(double);
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"exp", [](const Tensor& t) { return dt::exp(t); }, [](double x) { return std::exp(x); }},
      {"log", [](const Tensor& t) { return dt::log(t); }, [](double x) { return std::log(x); }},
      {"tanh", [](const Tensor& t) { return dt::tanh(t); }, [](double x) { return std::tanh(x); }},
      {"sigmoid", [](const Tensor& t) { return dt::sigmoid(t); }, sigmoid_ref},
      {"gelu", [](const Tensor& t) { return dt::gelu(t); }, gelu_ref},
      {"gelu_tanh", [](const Tensor& t) { return dt::gelu(t, dt::GeluApproximate::kTanh); },
       gelu_tanh_ref},
      {"silu", [](const Tensor& t) { return dt::silu(t); }, silu_ref},
  };
  return cases;
}

// The smallest positive normal value of d: results below it are compared absolutely (subnormal
// results carry fewer significant bits).
double min_normal(DType d) {
  switch (d) {
    case dt::kFloat64:
      return std::numeric_limits<double>::min();
    case dt::kFloat16:
      return 6.103515625e-05;
    default:
      return std::numeric_limits<float>::min();  // float32, bfloat16
  }
}

// ref applied to x's values (as stored), rounded to x's dtype.
std::vector<double> expected(const Tensor& x, double (*ref)(double)) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = ref(e);
  return dt::from_vector<double>(v, {static_cast<int64_t>(v.size())})
      .to(x.dtype())
      .to_vector<double>();
}

// The relative condition number |x f'(x) / f(x)| of ref at x (0 where it is not finite): a
// kernel that computes f in the compute type rounds its intermediate arguments, and their
// relative error is amplified by this much (e.g. gelu at x = -10: erfc(7.07) amplifies the
// rounding of x / sqrt(2) a hundredfold).
double condition(double (*ref)(double), double x) {
  const double h = 1e-6 * std::max(1.0, std::fabs(x));
  const double f = ref(x), df = (ref(x + h) - ref(x - h)) / (2 * h);
  const double c = std::fabs(x * df / f);
  return std::isfinite(c) ? c : 0.0;
}

// y = ref(x) elementwise within rtol * (1 + condition) relative, atol absolute; NaN matches
// NaN, infinities must match exactly.
void check_unary(const Tensor& y, const Tensor& x, double (*ref)(double), double rtol,
                 double atol) {
  REQUIRE(y.sizes() == x.sizes());
  REQUIRE(y.dtype() == x.dtype());
  const std::vector<double> xv = x.to_vector<double>(), got = y.to_vector<double>();
  const std::vector<double> want = expected(x, ref);
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    bool ok;
    if (std::isnan(want[i])) {
      ok = std::isnan(got[i]);
    } else if (std::isinf(want[i])) {
      ok = got[i] == want[i];
    } else {
      const double tol = atol + rtol * (1 + condition(ref, xv[i])) * std::fabs(want[i]);
      ok = std::fabs(got[i] - want[i]) <= tol;
    }
    if (!ok) {
      ++bad;
      FAIL_CHECK("x = " << xv[i] << ": got " << got[i] << ", expected " << want[i]);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("vectorised unary math matches float64 on odd sizes, every dtype and SIMD target",
          "[elementwise][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : kFloating) {
      for (int64_t n : {0, 1, 3, 7, 8, 9, 17, 31, 33, 255, 257, 1000}) {
        for (const auto& c : unary_cases()) {
          INFO(c.name << " " << dt::dtype_name(d) << " n = " << n);
          const bool positive = std::string(c.name) == "log";
          const auto v =
              ew::random_values(n, d, static_cast<uint32_t>(n + 3), positive ? 1e-3 : -10, 10);
          const Tensor x = ew::make(v, {n}, d);
          check_unary(c.op(x), x, c.ref, ew::rtol_for(d), min_normal(d));
        }
      }
    }
  });
}

TEST_CASE("float32 gelu (erf form) matches float64 on a dense sweep, every SIMD target",
          "[elementwise][simd]") {
  // The float lanes' erfc is the library's own approximation (simd_math-inl.h ErfcFloat): every
  // branch (|z| < 0.5, the fitted tail, z < 0 as 2 - erfc(-z), the subnormal range from
  // |z| = 9.19 and the cutoff at 10.05) on 160,001 points of [-15, 9], in the forward and
  // through gelu_backward.
  const int64_t n = 160001;
  std::vector<double> xv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) xv[static_cast<size_t>(i)] = -15.0 + 24.0 * i / (n - 1);
  for_each_simd_target([&](const std::string&) {
    const Tensor x = ew::make(xv, {n}, dt::kFloat32);
    const std::vector<double> xs = x.to_vector<double>();
    // The forward against erfc of the argument as the kernel rounds it (z = float(x * -1/sqrt 2)),
    // so the tolerance holds erfc itself to 1e-6 relative with no allowance for conditioning:
    // a tail off by the low part of z^2 (up to 3.8e-6 at x = -10) fails.
    const std::vector<double> got_f = dt::gelu(x).to_vector<double>();
    int bad = 0;
    for (size_t i = 0; i < got_f.size() && bad < 5; ++i) {
      const float z = static_cast<float>(xs[i]) * -0.70710678118654752440f;
      const double want = 0.5 * xs[i] * std::erfc(static_cast<double>(z));
      if (std::fabs(got_f[i] - want) > 1e-6 * std::fabs(want) + 1.2e-38) {
        ++bad;
        FAIL_CHECK("gelu x = " << xs[i] << ": got " << got_f[i] << ", expected " << want);
      }
    }
    // d/dx gelu = Phi(x) + x phi(x), against float64 erfc and exp. The kernel rounds x * x
    // before its exponential, an error of about x^2 / 2 float ulps in phi.
    const auto grad_ref = [](double v) {
      return 0.5 * std::erfc(-v * 0.70710678118654752440) +
             v * 0.39894228040143267794 * std::exp(-0.5 * v * v);
    };
    const std::vector<double> got =
        dt::gelu_backward(dt::ones({n}, dt::TensorOptions(dt::kFloat32)), x).to_vector<double>();
    for (size_t i = 0; i < got.size() && bad < 5; ++i) {
      const double want = grad_ref(xs[i]);
      // Near x = -0.75 the two terms cancel: the error is relative to the larger, Phi(x).
      const double scale = std::max(std::fabs(want), 0.5 * std::erfc(-xs[i] * 0.7071067811865476));
      const double tol = 1e-6 * (4 + 0.5 * xs[i] * xs[i]) * scale + 1.2e-38;
      if (std::fabs(got[i] - want) > tol) {
        ++bad;
        FAIL_CHECK("gelu_backward x = " << xs[i] << ": got " << got[i] << ", expected " << want);
      }
    }
    CHECK(bad == 0);
  });
}

TEST_CASE("vectorised unary math handles special and extreme values", "[elementwise][simd]") {
  const std::vector<double> special = {
      0.0,   -0.0,  kInf,  -kInf, kNan,  1e-40, -1e-40, 1e-300, 1e-8,  -1e-8, 0.5,    -0.5,  3.0,
      -3.0,  20.0,  -20.0, 88.5,  88.8,  -87.0, -100.,  -104.,  -105., 200.0, -200.0, 700.0, 709.5,
      710.0, -740., -746., 1e30,  -1e30, 1e300, -1e300, -80.5,  -88.0, -88.5, -95.0,  -102.0};
  for_each_simd_target([&](const std::string&) {
    for (DType d : kFloating) {
      for (const auto& c : unary_cases()) {
        INFO(c.name << " " << dt::dtype_name(d));
        // Placed at a position inside a vector and in the tail.
        const Tensor x = ew::make(special, {static_cast<int64_t>(special.size())}, d);
        ew::check_values(c.op(x), x.sizes(), d, expected(x, c.ref), ew::rtol_for(d), min_normal(d));
      }
    }
  });
}

TEST_CASE("vectorised unary math gives the same values in every memory layout",
          "[elementwise][simd]") {
  for (DType d : kFloating) {
    const Tensor base = ew::make(ew::random_values(9 * 37, d, 77, -6, 6), {9, 37}, d);
    for (const auto& c : unary_cases()) {
      const auto want = c.op(base.contiguous()).to_vector<double>();
      for (const auto& [layout, t] : ew::layouts(base)) {
        INFO(c.name << " " << dt::dtype_name(d) << " " << layout);
        const auto got = c.op(t).to_vector<double>();
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          if (std::isnan(want[i])) {
            CHECK(std::isnan(got[i]));
          } else {
            CHECK(got[i] == want[i]);
          }
        }
      }
    }
  }
}

namespace {

struct GradCase {
  const char* name;
  double (*f)(double);  // the forward, for finite differences
  std::function<Tensor(const Tensor& g, const Tensor& x)> backward;  // from the forward's input
};

const std::vector<GradCase>& grad_cases() {
  static const std::vector<GradCase> cases = {
      {"gelu", gelu_ref, [](const Tensor& g, const Tensor& x) { return dt::gelu_backward(g, x); }},
      {"gelu_tanh", gelu_tanh_ref,
       [](const Tensor& g, const Tensor& x) {
         return dt::gelu_backward(g, x, dt::GeluApproximate::kTanh);
       }},
      {"silu", silu_ref, [](const Tensor& g, const Tensor& x) { return dt::silu_backward(g, x); }},
      // sigmoid / tanh take the forward's output.
      {"sigmoid", sigmoid_ref,
       [](const Tensor& g, const Tensor& x) { return dt::sigmoid_backward(g, dt::sigmoid(x)); }},
      {"tanh", [](double x) { return std::tanh(x); },
       [](const Tensor& g, const Tensor& x) { return dt::tanh_backward(g, dt::tanh(x)); }},
  };
  return cases;
}

}  // namespace

TEST_CASE("activation backward kernels match central finite differences in float64",
          "[elementwise][backward]") {
  const int64_t n = 41;
  std::vector<double> xv = ew::random_values(n, dt::kFloat64, 5, -6, 6);
  xv[0] = 0.0;
  xv[1] = -1e-3;
  const std::vector<double> gv = ew::random_values(n, dt::kFloat64, 6, -2, 2);
  const Tensor x = ew::make(xv, {n}, dt::kFloat64), g = ew::make(gv, {n}, dt::kFloat64);
  for (const auto& c : grad_cases()) {
    INFO(c.name);
    std::vector<double> fd(n);
    const double h = 1e-6;
    for (int64_t i = 0; i < n; ++i) fd[i] = gv[i] * (c.f(xv[i] + h) - c.f(xv[i] - h)) / (2 * h);
    ew::check_values(c.backward(g, x), {n}, dt::kFloat64, fd, 1e-7, 1e-9);
  }
}

TEST_CASE("activation backward kernels in every dtype agree with float64",
          "[elementwise][backward][simd]") {
  for_each_simd_target([](const std::string&) {
    for (DType d : kFloating) {
      for (int64_t n : {1, 9, 33, 300}) {
        const Tensor x = ew::make(ew::random_values(n, d, 7, -8, 8), {n}, d);
        const Tensor g = ew::make(ew::random_values(n, d, 8, -2, 2), {n}, d);
        for (const auto& c : grad_cases()) {
          INFO(c.name << " " << dt::dtype_name(d) << " n = " << n);
          // The float64 kernel on the same (rounded) values is the reference; sigmoid / tanh get
          // the forward's output rounded to d, exactly what the d-typed call sees.
          Tensor want;
          if (std::string(c.name) == "sigmoid") {
            want = dt::sigmoid_backward(g.to(dt::kFloat64), dt::sigmoid(x).to(dt::kFloat64));
          } else if (std::string(c.name) == "tanh") {
            want = dt::tanh_backward(g.to(dt::kFloat64), dt::tanh(x).to(dt::kFloat64));
          } else {
            want = c.backward(g.to(dt::kFloat64), x.to(dt::kFloat64));
          }
          const Tensor got = c.backward(g, x);
          CHECK(got.dtype() == d);
          // A few roundings of the compute type on O(|g|) terms, then one of the output.
          ew::check_values(got, {n}, d, want.to_vector<double>(), 4 * ew::rtol_for(d),
                           4 * ew::rtol_for(d));
        }
      }
    }
  });
}

TEST_CASE("activation backward errors name the op and the argument", "[elementwise][backward]") {
  const Tensor a = dt::zeros({2, 3});
  REQUIRE_THROWS_WITH(dt::gelu_backward(a, dt::zeros({3, 2})),
                      Catch::Contains("[gelu_backward] grad of shape [2, 3] does not match x"));
  REQUIRE_THROWS_WITH(dt::sigmoid_backward(a, dt::zeros({2, 3}, dt::kFloat64)),
                      Catch::Contains("[sigmoid_backward] expected grad and out of one floating"));
  REQUIRE_THROWS_WITH(dt::silu_backward(dt::zeros({2}, dt::kInt64), dt::zeros({2}, dt::kInt64)),
                      Catch::Contains("[silu_backward]"));
  REQUIRE_THROWS_WITH(dt::tanh_backward(Tensor(), a), Catch::Contains("[tanh_backward]"));
}
