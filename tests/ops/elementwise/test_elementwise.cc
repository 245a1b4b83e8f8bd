// Elementwise ops against references computed in double by the test's own loops, over dtypes,
// broadcast shapes (uneven and zero-size included) and non-contiguous layouts.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>

#include "dtensor/config.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/detail/elementwise_kernels.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Shape;
using dt::Tensor;
using namespace dtensor::ewtest;

namespace {

const std::vector<Shape> kUnaryShapes = {{}, {0}, {7}, {3, 5}, {2, 0, 3}, {2, 3, 5}};

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  std::function<double(double)> ref;
  double lo, hi;
};

// The textbook formulas, in long double so that the cancellation in 1 + erf / 1 + tanh at
// large negative x stays far below the float64 tolerance.
double gelu_ref(double xd) {
  const long double x = xd;
  return static_cast<double>(0.5L * x * (1 + std::erf(x / std::sqrt(2.0L))));
}
double gelu_tanh_ref(double xd) {
  const long double x = xd;
  const long double k = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  return static_cast<double>(0.5L * x * (1 + std::tanh(k * (x + 0.044715L * x * x * x))));
}

std::vector<UnaryCase> float_unary_cases() {
  return {
      {"neg", [](const Tensor& t) { return dt::neg(t); }, [](double x) { return -x; }, -3, 3},
      {"operator-", [](const Tensor& t) { return -t; }, [](double x) { return -x; }, -3, 3},
      {"abs", [](const Tensor& t) { return dt::abs(t); }, [](double x) { return std::fabs(x); }, -3,
       3},
      {"exp", [](const Tensor& t) { return dt::exp(t); }, [](double x) { return std::exp(x); }, -3,
       3},
      {"log", [](const Tensor& t) { return dt::log(t); }, [](double x) { return std::log(x); },
       0.05, 5},
      {"sqrt", [](const Tensor& t) { return dt::sqrt(t); }, [](double x) { return std::sqrt(x); },
       0, 5},
      {"rsqrt", [](const Tensor& t) { return dt::rsqrt(t); },
       [](double x) { return 1 / std::sqrt(x); }, 0.05, 5},
      {"sigmoid", [](const Tensor& t) { return dt::sigmoid(t); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, -6, 6},
      {"tanh", [](const Tensor& t) { return dt::tanh(t); }, [](double x) { return std::tanh(x); },
       -3, 3},
      {"sin", [](const Tensor& t) { return dt::sin(t); }, [](double x) { return std::sin(x); }, -3,
       3},
      {"cos", [](const Tensor& t) { return dt::cos(t); }, [](double x) { return std::cos(x); }, -3,
       3},
      {"tan", [](const Tensor& t) { return dt::tan(t); }, [](double x) { return std::tan(x); },
       -1.2, 1.2},
      {"erf", [](const Tensor& t) { return dt::erf(t); }, [](double x) { return std::erf(x); }, -3,
       3},
      {"exp2", [](const Tensor& t) { return dt::exp2(t); }, [](double x) { return std::exp2(x); },
       -3, 3},
      {"expm1", [](const Tensor& t) { return dt::expm1(t); },
       [](double x) { return std::expm1(x); }, -3, 3},
      {"log1p", [](const Tensor& t) { return dt::log1p(t); },
       [](double x) { return std::log1p(x); }, -0.9, 5},
      {"log2", [](const Tensor& t) { return dt::log2(t); }, [](double x) { return std::log2(x); },
       0.05, 5},
      {"log10", [](const Tensor& t) { return dt::log10(t); },
       [](double x) { return std::log10(x); }, 0.05, 5},
      {"reciprocal", [](const Tensor& t) { return dt::reciprocal(t); },
       [](double x) { return 1 / x; }, 0.05, 5},
      {"sinh", [](const Tensor& t) { return dt::sinh(t); }, [](double x) { return std::sinh(x); },
       -3, 3},
      {"cosh", [](const Tensor& t) { return dt::cosh(t); }, [](double x) { return std::cosh(x); },
       -3, 3},
      {"asin", [](const Tensor& t) { return dt::asin(t); }, [](double x) { return std::asin(x); },
       -0.99, 0.99},
      {"acos", [](const Tensor& t) { return dt::acos(t); }, [](double x) { return std::acos(x); },
       -0.99, 0.99},
      {"atan", [](const Tensor& t) { return dt::atan(t); }, [](double x) { return std::atan(x); },
       -5, 5},
      {"asinh", [](const Tensor& t) { return dt::asinh(t); },
       [](double x) { return std::log(x + std::sqrt(x * x + 1)); }, -5, 5},
      {"acosh", [](const Tensor& t) { return dt::acosh(t); },
       [](double x) { return std::log(x + std::sqrt(x * x - 1)); }, 1, 5},
      {"atanh", [](const Tensor& t) { return dt::atanh(t); },
       [](double x) { return 0.5 * std::log((1 + x) / (1 - x)); }, -0.95, 0.95},
      {"erfc", [](const Tensor& t) { return dt::erfc(t); },
       [](double x) { return 1 - std::erf(x); }, -3, 3},
      {"log_sigmoid", [](const Tensor& t) { return dt::log_sigmoid(t); },
       [](double x) { return std::log(1 / (1 + std::exp(-x))); }, -8, 8},
      {"hardsigmoid", [](const Tensor& t) { return dt::hardsigmoid(t); },
       [](double x) { return std::clamp(x / 6 + 0.5, 0.0, 1.0); }, -5, 5},
      {"hardswish", [](const Tensor& t) { return dt::hardswish(t); },
       [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }, -5, 5},
      {"mish", [](const Tensor& t) { return dt::mish(t); },
       [](double x) { return x * std::tanh(std::log(1 + std::exp(x))); }, -5, 5},
      {"selu", [](const Tensor& t) { return dt::selu(t); },
       [](double x) {
         return 1.0507009873554804934 * (x > 0 ? x : 1.6732632423543772848 * (std::exp(x) - 1));
       },
       -4, 4},
      {"floor", [](const Tensor& t) { return dt::floor(t); },
       [](double x) { return std::floor(x); }, -3, 3},
      {"ceil", [](const Tensor& t) { return dt::ceil(t); }, [](double x) { return std::ceil(x); },
       -3, 3},
      {"round", [](const Tensor& t) { return dt::round(t); },
       [](double x) { return std::nearbyint(x); }, -3, 3},
      {"trunc", [](const Tensor& t) { return dt::trunc(t); },
       [](double x) { return std::trunc(x); }, -3, 3},
      {"frac", [](const Tensor& t) { return dt::frac(t); },
       [](double x) { return x - std::trunc(x); }, -3, 3},
      {"sign", [](const Tensor& t) { return dt::sign(t); },
       [](double x) { return double((x > 0) - (x < 0)); }, -3, 3},
      {"relu", [](const Tensor& t) { return dt::relu(t); },
       [](double x) { return x > 0 ? x : 0.0; }, -3, 3},
      {"gelu", [](const Tensor& t) { return dt::gelu(t); }, gelu_ref, -4, 4},
      {"gelu_tanh", [](const Tensor& t) { return dt::gelu(t, dt::GeluApproximate::kTanh); },
       gelu_tanh_ref, -4, 4},
      {"silu", [](const Tensor& t) { return dt::silu(t); },
       [](double x) { return x / (1 + std::exp(-x)); }, -5, 5},
      // The activations of issue 44 (their kinks and special values against PyTorch:
      // test_activations_torch_mpi).
      {"relu6", [](const Tensor& t) { return dt::relu6(t); },
       [](double x) { return std::clamp(x, 0.0, 6.0); }, -3, 9},
      {"softplus", [](const Tensor& t) { return dt::softplus(t); },
       [](double x) { return std::log1p(std::exp(x)); }, -8, 8},
      {"softplus beta 2 threshold 5", [](const Tensor& t) { return dt::softplus(t, 2.0, 5.0); },
       [](double x) { return 2 * x > 5 ? x : std::log1p(std::exp(2 * x)) / 2; }, -4, 4},
      {"elu", [](const Tensor& t) { return dt::elu(t); },
       [](double x) { return x > 0 ? x : std::expm1(x); }, -4, 4},
      {"elu alpha 0.5", [](const Tensor& t) { return dt::elu(t, 0.5); },
       [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); }, -4, 4},
      {"celu alpha 2", [](const Tensor& t) { return dt::celu(t, 2.0); },
       [](double x) { return x > 0 ? x : 2 * std::expm1(x / 2); }, -4, 4},
      {"leaky_relu", [](const Tensor& t) { return dt::leaky_relu(t); },
       [](double x) { return x > 0 ? x : 0.01 * x; }, -4, 4},
      {"leaky_relu 0.2", [](const Tensor& t) { return dt::leaky_relu(t, 0.2); },
       [](double x) { return x > 0 ? x : 0.2 * x; }, -4, 4},
      {"pow 2", [](const Tensor& t) { return dt::pow(t, 2); }, [](double x) { return x * x; }, -3,
       3},
      {"pow 3.0", [](const Tensor& t) { return dt::pow(t, 3.0); },
       [](double x) { return x * x * x; }, -3, 3},
      {"pow 0.5", [](const Tensor& t) { return dt::pow(t, 0.5); },
       [](double x) { return std::sqrt(x); }, 0, 4},
      {"pow -1.5", [](const Tensor& t) { return dt::pow(t, -1.5); },
       [](double x) { return std::pow(x, -1.5); }, 0.1, 4},
      {"add scalar", [](const Tensor& t) { return dt::add(t, 1.25); },
       [](double x) { return x + 1.25; }, -3, 3},
      {"scalar - t", [](const Tensor& t) { return 2.5 - t; }, [](double x) { return 2.5 - x; }, -3,
       3},
      {"t - scalar", [](const Tensor& t) { return t - 2; }, [](double x) { return x - 2; }, -3, 3},
      {"mul scalar", [](const Tensor& t) { return 3 * t; }, [](double x) { return 3 * x; }, -3, 3},
      {"div scalar", [](const Tensor& t) { return t / 4.0; }, [](double x) { return x / 4; }, -3,
       3},
      {"scalar / t", [](const Tensor& t) { return 1.5 / t; }, [](double x) { return 1.5 / x; },
       0.25, 3},
  };
}

// Divisors away from zero: |v| in [0.5, 3], alternating signs.
std::vector<double> divisor_values(int64_t n, DType dtype, uint32_t seed) {
  std::vector<double> v = random_values(n, DType::kFloat64, seed, 0.5, 3);
  for (size_t i = 0; i < v.size(); i += 2) v[i] = -v[i];
  return make(v, {n}, dtype).to_vector<double>();
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  std::function<double(double, double)> ref;
};

std::vector<BinaryCase> float_binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return dt::add(a, b); },
       [](double a, double b) { return a + b; }},
      {"operator+", [](const Tensor& a, const Tensor& b) { return a + b; },
       [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; },
       [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; },
       [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; },
       [](double a, double b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return dt::maximum(a, b); },
       [](double a, double b) { return a > b ? a : b; }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return dt::minimum(a, b); },
       [](double a, double b) { return a < b ? a : b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return dt::pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }},
      {"fmod", [](const Tensor& a, const Tensor& b) { return dt::fmod(a, b); },
       [](double a, double b) { return std::fmod(a, b); }},
      {"remainder", [](const Tensor& a, const Tensor& b) { return dt::remainder(a, b); },
       [](double a, double b) { return a - std::floor(a / b) * b; }},
      {"atan2", [](const Tensor& a, const Tensor& b) { return dt::atan2(a, b); },
       [](double a, double b) { return std::atan2(a, b); }},
      {"hypot", [](const Tensor& a, const Tensor& b) { return dt::hypot(a, b); },
       [](double a, double b) { return std::hypot(a, b); }},
      {"logaddexp", [](const Tensor& a, const Tensor& b) { return dt::logaddexp(a, b); },
       [](double a, double b) { return std::log(std::exp(a) + std::exp(b)); }},
      // Negative divisors give NaN in both (no zero self among these values).
      {"xlogy", [](const Tensor& a, const Tensor& b) { return dt::xlogy(a, b); },
       [](double a, double b) { return a * std::log(b); }},
      {"copysign", [](const Tensor& a, const Tensor& b) { return dt::copysign(a, b); },
       [](double a, double b) { return std::copysign(a, b); }},
  };
}

const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {{{3, 5}, {3, 5}},
                                                            {{3, 5}, {5}},
                                                            {{7}, {}},
                                                            {{}, {}},
                                                            {{2, 1, 4}, {3, 1}},
                                                            {{4, 1}, {1, 6}},
                                                            {{0, 3}, {3}},
                                                            {{2, 0, 3}, {2, 1, 3}},
                                                            {{1}, {9}},
                                                            {{2, 3, 4}, {2, 3, 4}},
                                                            {{5, 1, 3}, {5, 4, 3}}};

template <typename T>
void run_binary_cases(const std::vector<BinaryCase>& cases, double rtol, double atol) {
  const DType dtype = dt::dtype_of_v<T>;
  uint32_t seed = 1;
  for (const auto& [sa, sb] : kBinaryShapes) {
    const Shape out_shape = [&] {
      Shape o(std::max(sa.size(), sb.size()));
      for (size_t i = 0; i < o.size(); ++i) {
        const size_t ia = i + sa.size(), ib = i + sb.size();
        const int64_t x = ia >= o.size() ? sa[ia - o.size()] : 1;
        const int64_t y = ib >= o.size() ? sb[ib - o.size()] : 1;
        o[i] = x == 1 ? y : x;
      }
      return o;
    }();
    const int64_t out_n = dt::shape_numel(out_shape);
    const std::vector<double> va = random_values(dt::shape_numel(sa), dtype, seed++);
    const std::vector<double> vb = divisor_values(dt::shape_numel(sb), dtype, seed++);
    for (const auto& c : cases) {
      std::vector<double> expect(out_n);
      for (int64_t i = 0; i < out_n; ++i) {
        expect[i] =
            c.ref(va[broadcast_source(i, out_shape, sa)], vb[broadcast_source(i, out_shape, sb)]);
        if (!dt::is_floating(dtype)) expect[i] = round_to(expect[i], dtype);
      }
      for (const auto& [la, ta] : layouts(make(va, sa, dtype))) {
        for (const auto& [lb, tb] : layouts(make(vb, sb, dtype))) {
          INFO(c.name << " " << dt::shape_str(sa) << " (" << la << ") with " << dt::shape_str(sb)
                      << " (" << lb << ")");
          check_values(c.fn(ta, tb), out_shape, dtype, expect, rtol, atol);
        }
      }
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("float unary ops match double references", "[elementwise]", float, double,
                   dt::Half, dt::BFloat16) {
  const DType dtype = dt::dtype_of_v<TestType>;
  uint32_t seed = 100;
  for (const auto& c : float_unary_cases()) {
    for (const Shape& shape : kUnaryShapes) {
      const std::vector<double> v =
          random_values(dt::shape_numel(shape), dtype, seed++, c.lo, c.hi);
      std::vector<double> expect(v.size());
      for (size_t i = 0; i < v.size(); ++i) expect[i] = c.ref(v[i]);
      for (const auto& [layout, t] : layouts(make(v, shape, dtype))) {
        INFO(c.name << " on " << dt::shape_str(shape) << " " << dt::dtype_name(dtype) << " ("
                    << layout << ")");
        check_values(c.fn(t), shape, dtype, expect, rtol_for(dtype), atol_for(dtype));
      }
    }
  }
}

TEMPLATE_TEST_CASE("float binary ops broadcast and match double references", "[elementwise]", float,
                   double, dt::Half, dt::BFloat16) {
  const DType dtype = dt::dtype_of_v<TestType>;
  run_binary_cases<TestType>(float_binary_cases(), rtol_for(dtype), atol_for(dtype));
}

TEMPLATE_TEST_CASE("integer binary ops are exact", "[elementwise]", int32_t, int64_t) {
  run_binary_cases<TestType>(
      {
          {"add", [](const Tensor& a, const Tensor& b) { return a + b; },
           [](double a, double b) { return a + b; }},
          {"sub", [](const Tensor& a, const Tensor& b) { return a - b; },
           [](double a, double b) { return a - b; }},
          {"mul", [](const Tensor& a, const Tensor& b) { return a * b; },
           [](double a, double b) { return a * b; }},
          {"maximum", [](const Tensor& a, const Tensor& b) { return dt::maximum(a, b); },
           [](double a, double b) { return a > b ? a : b; }},
          {"minimum", [](const Tensor& a, const Tensor& b) { return dt::minimum(a, b); },
           [](double a, double b) { return a < b ? a : b; }},
      },
      0, 0);
}

TEMPLATE_TEST_CASE("integer unary ops and scalars are exact", "[elementwise]", int32_t, int64_t) {
  const DType dtype = dt::dtype_of_v<TestType>;
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> fns = {
      {"neg", [](const Tensor& t) { return dt::neg(t); }},
      {"abs", [](const Tensor& t) { return dt::abs(t); }},
      {"relu", [](const Tensor& t) { return dt::relu(t); }},
      {"relu6", [](const Tensor& t) { return dt::relu6(t); }},
      {"pow 3", [](const Tensor& t) { return dt::pow(t, 3); }},
      {"pow 0", [](const Tensor& t) { return dt::pow(t, 0); }},
      {"add 7", [](const Tensor& t) { return t + 7; }},
      {"5 - t", [](const Tensor& t) { return 5 - t; }},
      {"mul -2", [](const Tensor& t) { return t * -2; }},
      {"floor", [](const Tensor& t) { return dt::floor(t); }},
      {"round", [](const Tensor& t) { return dt::round(t); }},
      {"sign", [](const Tensor& t) { return dt::sign(t); }},
  };
  const std::vector<std::function<double(double)>> refs = {
      [](double x) { return -x; },
      [](double x) { return std::fabs(x); },
      [](double x) { return x > 0 ? x : 0; },
      [](double x) { return std::clamp(x, 0.0, 6.0); },
      [](double x) { return x * x * x; },
      [](double) { return 1.0; },
      [](double x) { return x + 7; },
      [](double x) { return 5 - x; },
      [](double x) { return -2 * x; },
      [](double x) { return x; },
      [](double x) { return x; },
      [](double x) { return double((x > 0) - (x < 0)); },
  };
  uint32_t seed = 7;
  for (size_t k = 0; k < fns.size(); ++k) {
    for (const Shape& shape : kUnaryShapes) {
      const std::vector<double> v = random_values(dt::shape_numel(shape), dtype, seed++, -9, 9);
      std::vector<double> expect(v.size());
      for (size_t i = 0; i < v.size(); ++i) expect[i] = refs[k](v[i]);
      for (const auto& [layout, t] : layouts(make(v, shape, dtype))) {
        INFO(fns[k].first << " on " << dt::shape_str(shape) << " (" << layout << ")");
        check_values(fns[k].second(t), shape, dtype, expect, 0, 0);
      }
    }
  }
}

TEMPLATE_TEST_CASE("comparisons give bool in the promoted dtype", "[elementwise]", float, double,
                   dt::Half, dt::BFloat16, int32_t, int64_t) {
  const DType dtype = dt::dtype_of_v<TestType>;
  using Cmp = std::function<bool(double, double)>;
  const std::vector<std::tuple<const char*, Tensor (*)(const Tensor&, const Tensor&),
                               Tensor (*)(const Tensor&, const dt::Scalar&), Cmp>>
      cases = {
          {"eq", &dt::eq, &dt::eq, [](double a, double b) { return a == b; }},
          {"ne", &dt::ne, &dt::ne, [](double a, double b) { return a != b; }},
          {"lt", &dt::lt, &dt::lt, [](double a, double b) { return a < b; }},
          {"le", &dt::le, &dt::le, [](double a, double b) { return a <= b; }},
          {"gt", &dt::gt, &dt::gt, [](double a, double b) { return a > b; }},
          {"ge", &dt::ge, &dt::ge, [](double a, double b) { return a >= b; }},
      };
  const Shape sa{4, 1, 3}, sb{5, 3}, so{4, 5, 3};
  // Small integers so that equal pairs occur.
  std::vector<double> va = random_values(12, DType::kInt64, 3, -2, 2);
  std::vector<double> vb = random_values(15, DType::kInt64, 4, -2, 2);
  for (const auto& [name, tt, ts, cmp] : cases) {
    std::vector<double> expect(60), expect_s(12);
    for (int64_t i = 0; i < 60; ++i) {
      expect[i] = cmp(va[broadcast_source(i, so, sa)], vb[broadcast_source(i, so, sb)]);
    }
    for (int64_t i = 0; i < 12; ++i) expect_s[i] = cmp(va[i], 1.0);
    for (const auto& [la, ta] : layouts(make(va, sa, dtype))) {
      INFO(name << " " << dt::dtype_name(dtype) << " (" << la << ")");
      check_values(tt(ta, make(vb, sb, dtype)), so, DType::kBool, expect, 0, 0);
      check_values(ts(ta, 1), sa, DType::kBool, expect_s, 0, 0);
    }
  }
  // Mixed dtypes compare in the promoted dtype: 1.5 is not equal to an integer 1.
  Tensor ints = make({1, 2, 3}, {3}, DType::kInt32);
  check_values(dt::eq(ints, 1.5), {3}, DType::kBool, {0, 0, 0}, 0, 0);
  check_values(dt::lt(ints, 1.5), {3}, DType::kBool, {1, 0, 0}, 0, 0);
  // (2.5 stored in an integer dtype is 2.)
  check_values(dt::eq(ints, make({1, 2.5, 3}, {3}, dtype)), {3}, DType::kBool,
               {1, dt::is_floating(dtype) ? 0.0 : 1.0, 1}, 0, 0);
}

TEMPLATE_TEST_CASE("where selects with three-way broadcasting", "[elementwise]", float, dt::Half,
                   int64_t, bool) {
  const DType dtype = dt::dtype_of_v<TestType>;
  const Shape sc{4, 1}, sa{1, 5}, sb{5}, so{4, 5};
  const std::vector<double> vc = random_values(4, DType::kBool, 9);
  const std::vector<double> va = random_values(5, dtype, 10);
  const std::vector<double> vb = random_values(5, dtype, 11);
  std::vector<double> expect(20);
  for (int64_t i = 0; i < 20; ++i) {
    expect[i] = vc[broadcast_source(i, so, sc)] != 0 ? va[broadcast_source(i, so, sa)]
                                                     : vb[broadcast_source(i, so, sb)];
  }
  for (const auto& [lc, tc] : layouts(make(vc, sc, DType::kBool))) {
    INFO("condition layout " << lc);
    check_values(dt::where(tc, make(va, sa, dtype), make(vb, sb, dtype)), so, dtype, expect, 0, 0);
  }
  // Zero-size broadcast.
  Tensor e = dt::where(dt::zeros({0, 1}, DType::kBool), make(va, sa, dtype), make(vb, sb, dtype));
  CHECK(dt::shape_str(e.sizes()) == "[0, 5]");
  // Mixed dtypes promote: int64 and float32 give float32.
  Tensor m = dt::where(make({1, 0}, {2}, DType::kBool), make({1, 2}, {2}, DType::kInt64),
                       make({0.5, 0.25}, {2}, DType::kFloat32));
  check_values(m, {2}, DType::kFloat32, {1, 0.25}, 0, 0);
}

TEST_CASE("bool arithmetic is logical", "[elementwise]") {
  Tensor a = make({0, 0, 1, 1}, {4}, DType::kBool);
  Tensor b = make({0, 1, 0, 1}, {4}, DType::kBool);
  check_values(a + b, {4}, DType::kBool, {0, 1, 1, 1}, 0, 0);
  check_values(a * b, {4}, DType::kBool, {0, 0, 0, 1}, 0, 0);
  check_values(dt::maximum(a, b), {4}, DType::kBool, {0, 1, 1, 1}, 0, 0);
  // Bool with an int scalar promotes to int64; true division gives float32.
  check_values(a + 2, {4}, DType::kInt64, {2, 2, 3, 3}, 0, 0);
  check_values(
      a / b, {4}, DType::kFloat32,
      {std::numeric_limits<double>::quiet_NaN(), 0, std::numeric_limits<double>::infinity(), 1}, 0,
      0);
  REQUIRE_THROWS_WITH(a - b, Catch::Contains("[sub]") && Catch::Contains("bool"));
  REQUIRE_THROWS_WITH(dt::neg(a), Catch::Contains("[neg]") && Catch::Contains("bool"));
  REQUIRE_THROWS_WITH(dt::abs(a), Catch::Contains("[abs]"));
  REQUIRE_THROWS_WITH(dt::relu(a), Catch::Contains("[relu]"));
}

TEST_CASE("mixed dtypes promote like PyTorch", "[elementwise]") {
  Tensor i32 = make({1, 2, 3}, {3}, DType::kInt32);
  Tensor i64 = make({4, 5, 6}, {3}, DType::kInt64);
  Tensor f16 = make({0.5, 0.25, 2}, {3}, DType::kFloat16);
  Tensor bf = make({1, 2, 4}, {3}, DType::kBFloat16);
  Tensor f64 = make({1, 1, 1}, {3}, DType::kFloat64);
  check_values(i32 + i64, {3}, DType::kInt64, {5, 7, 9}, 0, 0);
  check_values(i64 * f16, {3}, DType::kFloat16, {2, 1.25, 12}, 0, 0);
  check_values(f16 + bf, {3}, DType::kFloat32, {1.5, 2.25, 6}, 0, 0);
  check_values(bf - f64, {3}, DType::kFloat64, {0, 1, 3}, 0, 0);
  check_values(i32 / i64, {3}, DType::kFloat32, {0.25, 0.4, 0.5}, 1e-7, 0);
  check_values(i32 * 2.5, {3}, DType::kFloat32, {2.5, 5, 7.5}, 0, 0);
  check_values(i32 / 2, {3}, DType::kFloat32, {0.5, 1, 1.5}, 0, 0);
  check_values(f16 * 3.0, {3}, DType::kFloat16, {1.5, 0.75, 6}, 0, 0);
  // A 0-d tensor of a higher category decides the dtype, one of the same category does not.
  check_values(i32 + dt::full({}, 0.5, DType::kFloat64), {3}, DType::kFloat64, {1.5, 2.5, 3.5}, 0,
               0);
  check_values(f16 + dt::full({}, 0.5, DType::kFloat64), {3}, DType::kFloat16, {1, 0.75, 2.5}, 0,
               0);
  // Float-only math on integers computes in float32; pow follows result_type.
  check_values(dt::exp(make({0, 1}, {2}, DType::kInt64)), {2}, DType::kFloat32, {1, std::exp(1.0)},
               1e-6, 0);
  check_values(dt::sqrt(make({4, 9}, {2}, DType::kInt32)), {2}, DType::kFloat32, {2, 3}, 0, 0);
  check_values(dt::log(make({1, 0}, {2}, DType::kBool)), {2}, DType::kFloat32,
               {0, -std::numeric_limits<double>::infinity()}, 0, 0);
  check_values(dt::pow(i32, 2), {3}, DType::kInt32, {1, 4, 9}, 0, 0);
  check_values(dt::pow(i32, 0.5), {3}, DType::kFloat32, {1, std::sqrt(2.0), std::sqrt(3.0)}, 1e-6,
               0);
  check_values(dt::cast(f16, DType::kInt32), {3}, DType::kInt32, {0, 0, 2}, 0, 0);
  check_values(dt::cast(i32, DType::kBool), {3}, DType::kBool, {1, 1, 1}, 0, 0);
  check_values(dt::cast(make({1.5, -2.7}, {2}, DType::kFloat32), DType::kBFloat16), {2},
               DType::kBFloat16, {1.5, round_to(-2.7, DType::kBFloat16)}, 0, 0);
  CHECK(dt::cast(i32, DType::kInt32).storage().is_same(i32.storage()));
}

TEST_CASE("special values: NaN and infinities", "[elementwise]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = make({0, -1, nan, inf, -inf}, {5}, DType::kFloat32);
  check_values(dt::log(x), {5}, DType::kFloat32, {-inf, nan, nan, inf, nan}, 0, 0);
  check_values(dt::sqrt(x), {5}, DType::kFloat32, {0, nan, nan, inf, nan}, 0, 0);
  check_values(dt::exp(x), {5}, DType::kFloat32, {1, std::exp(-1.0), nan, inf, 0}, 1e-6, 0);
  check_values(dt::relu(x), {5}, DType::kFloat32, {0, 0, nan, inf, 0}, 0, 0);
  check_values(dt::sigmoid(x), {5}, DType::kFloat32, {0.5, 1 / (1 + std::exp(1.0)), nan, 1, 0},
               1e-6, 0);
  Tensor y = make({nan, 1, 2, nan, -inf}, {5}, DType::kFloat32);
  Tensor z = make({1, nan, 3, nan, 0}, {5}, DType::kFloat32);
  check_values(dt::maximum(y, z), {5}, DType::kFloat32, {nan, nan, 3, nan, 0}, 0, 0);
  check_values(dt::minimum(y, z), {5}, DType::kFloat32, {nan, nan, 2, nan, -inf}, 0, 0);
  check_values(dt::eq(y, y), {5}, DType::kBool, {0, 1, 1, 0, 1}, 0, 0);
  check_values(dt::ne(y, y), {5}, DType::kBool, {1, 0, 0, 1, 0}, 0, 0);
}

TEST_CASE("in-place ops read an other that overlaps self as it was before the call",
          "[elementwise]") {
  // other a view of self's own memory: its first column (a value repeated along each row, in
  // rows both shorter and longer than the repeated-value loop's 8), or self shifted by one
  // element either way. The result combines self with other's old values, as for a copy.
  for (int64_t w : {4, 16}) {
    INFO("row length " << w);
    const std::vector<double> v = random_values(3 * w, DType::kFloat32, 31);
    Tensor x = make(v, {3, w}, DType::kFloat32);
    dt::add_(x, x.narrow(1, 0, 1));
    std::vector<double> expect(v.size());
    for (int64_t i = 0; i < 3 * w; ++i) expect[i] = float(v[i] + v[i - i % w]);
    check_values(x, {3, w}, DType::kFloat32, expect, 0, 0);
    for (int shift : {1, -1}) {
      INFO("shift " << shift);
      Tensor y = make(v, {3 * w}, DType::kFloat32);
      const int64_t n = 3 * w - 1;
      const Tensor self = y.narrow(0, shift > 0 ? 0 : 1, n);
      dt::mul_(self, y.narrow(0, shift > 0 ? 1 : 0, n));
      std::vector<double> want = v;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = shift > 0 ? i : i + 1;
        want[at] = float(v[at] * v[at + shift]);
      }
      check_values(y, {3 * w}, DType::kFloat32, want, 0, 0);
    }
  }
  // self itself: each element combines with its own old value.
  const std::vector<double> v = random_values(20, DType::kFloat32, 32);
  Tensor x = make(v, {20}, DType::kFloat32);
  dt::mul_(x, x);
  std::vector<double> expect(20);
  for (int i = 0; i < 20; ++i) expect[i] = float(float(v[i]) * float(v[i]));
  check_values(x, {20}, DType::kFloat32, expect, 0, 0);
}

TEST_CASE("in-place ops write into self and keep its dtype and shape", "[elementwise]") {
  const std::vector<double> va = random_values(12, DType::kFloat32, 21);
  const std::vector<double> vb = random_values(4, DType::kFloat32, 22);
  for (const auto& [layout, t] : layouts(make(va, {3, 4}, DType::kFloat32))) {
    INFO("self layout " << layout);
    Tensor self = t;
    std::vector<double> expect(12);
    for (int i = 0; i < 12; ++i) expect[i] = va[i] + vb[i % 4];
    Tensor r = dt::add_(self, make(vb, {4}, DType::kFloat32));
    CHECK(r.data_ptr() == self.data_ptr());
    check_values(self, {3, 4}, DType::kFloat32, expect, 1e-6, 0);
    for (int i = 0; i < 12; ++i) expect[i] = float(float(expect[i]) * 2.0f);
    dt::mul_(self, 2);
    check_values(self, {3, 4}, DType::kFloat32, expect, 0, 0);
    for (int i = 0; i < 12; ++i) expect[i] = float(float(expect[i]) - 1.0f);
    dt::sub_(self, dt::full({}, 1.0, DType::kFloat64));  // other converted to self's dtype
    check_values(self, {3, 4}, DType::kFloat32, expect, 0, 0);
    for (int i = 0; i < 12; ++i) expect[i] = float(float(expect[i]) / 4.0f);
    dt::div_(self, 4);
    check_values(self, {3, 4}, DType::kFloat32, expect, 0, 0);
  }
  // Integer self: integer and bool operands are fine, a float result is not.
  Tensor ints = make({1, 2, 3}, {3}, DType::kInt64);
  dt::add_(ints, make({1, 0, 1}, {3}, DType::kBool));
  dt::mul_(ints, make({2, 2, 2}, {3}, DType::kInt32));
  check_values(ints, {3}, DType::kInt64, {4, 4, 8}, 0, 0);
  REQUIRE_THROWS_WITH(dt::add_(ints, 0.5),
                      Catch::Contains("[add_] result type float32 can't be cast to the desired "
                                      "output type int64"));
  REQUIRE_THROWS_WITH(dt::div_(ints, 2), Catch::Contains("[div_]"));
  REQUIRE_THROWS_WITH(
      dt::mul_(ints, make({1, 2}, {2}, DType::kInt64)),
      Catch::Contains("[mul_] cannot broadcast shapes [3] and [2] (argument other)"));
  REQUIRE_THROWS_WITH(dt::add_(ints, dt::zeros({2, 3}, DType::kInt64)),
                      Catch::Contains("[add_] output with shape [3] doesn't match the broadcast "
                                      "shape [2, 3]"));
  // fill_, zero_, copy_.
  Tensor f = dt::zeros({2, 3}, DType::kFloat16);
  dt::fill_(f, 1.5);
  check_values(f, {2, 3}, DType::kFloat16, std::vector<double>(6, 1.5), 0, 0);
  dt::copy_(f.select(0, 1), make({1, 2, 3}, {3}, DType::kInt32));
  check_values(f, {2, 3}, DType::kFloat16, {1.5, 1.5, 1.5, 1, 2, 3}, 0, 0);
  dt::zero_(f.select(0, 0));
  check_values(f, {2, 3}, DType::kFloat16, {0, 0, 0, 1, 2, 3}, 0, 0);
  // Zero-size in-place is a no-op.
  Tensor empty = dt::zeros({0, 4});
  CHECK(dt::add_(empty, make(vb, {4}, DType::kFloat32)).numel() == 0);
}

TEST_CASE("elementwise errors name the op and the argument", "[elementwise]") {
  Tensor a = dt::zeros({2, 3});
  Tensor b = dt::zeros({4});
  REQUIRE_THROWS_AS(dt::add(a, b), dt::Error);
  REQUIRE_THROWS_WITH(
      dt::add(a, b),
      Catch::Contains("[add] cannot broadcast shapes [2, 3] and [4] (argument other)"));
  REQUIRE_THROWS_WITH(a * b, Catch::Contains("[mul] cannot broadcast"));
  REQUIRE_THROWS_WITH(dt::maximum(a, b), Catch::Contains("[maximum]"));
  REQUIRE_THROWS_WITH(dt::lt(a, b), Catch::Contains("[lt]"));
  REQUIRE_THROWS_WITH(
      dt::where(dt::zeros({2, 3}, DType::kBool), a, b),
      Catch::Contains("[where] cannot broadcast") && Catch::Contains("(argument other)"));
  REQUIRE_THROWS_WITH(dt::where(a, a, a), Catch::Contains("[where] expected a bool condition, "
                                                          "got float32 (argument condition)"));
  REQUIRE_THROWS_WITH(
      dt::gelu(dt::zeros({2}, DType::kInt32)),
      Catch::Contains("[gelu] expected a floating input") && Catch::Contains("int32"));
  REQUIRE_THROWS_WITH(dt::silu(dt::zeros({2}, DType::kBool)), Catch::Contains("[silu]"));
  REQUIRE_THROWS_WITH(dt::pow(dt::zeros({2}, DType::kInt64), -1),
                      Catch::Contains("[pow] integers to negative integer powers"));
  REQUIRE_THROWS_WITH(dt::add(Tensor(), a), Catch::Contains("[add] argument self is an undefined"));
  REQUIRE_THROWS_WITH(dt::exp(Tensor()), Catch::Contains("[exp] argument self"));

  // Device checks, with a CUDA tensor that is never read (from_blob only records the device).
  float storage[6] = {};
  Tensor cuda = dt::from_blob(storage, {2, 3}, DType::kFloat32, dt::Device(dt::kCUDA, 0));
  REQUIRE_THROWS_WITH(dt::add(a, cuda),
                      Catch::Contains("[add]") && Catch::Contains("argument other is on cuda:0"));
  // CUDA inputs dispatch to the CUDA kernels (tests/gpu); without CUDA compiled in they raise.
  if (!DTENSOR_HAVE_CUDA) {
    REQUIRE_THROWS_WITH(dt::add(cuda, cuda), Catch::Contains("CUDA support is not compiled in"));
    REQUIRE_THROWS_WITH(dt::exp(cuda), Catch::Contains("CUDA support is not compiled in"));
    REQUIRE_THROWS_WITH(dt::mul_(cuda, 2), Catch::Contains("dtensor was built without CUDA"));
  }
}

TEST_CASE("elementwise kernels name an op their typed switch has no case for", "[elementwise]") {
  // The public functions refuse these first; the kernels' own message is the last guard.
  using dt::detail::BinaryOp;
  using dt::detail::UnaryOp;
  auto op_text = [](const char* kernel, auto op, const char* dtype) {
    return std::string("[") + kernel + "] op " + std::to_string(static_cast<int>(op)) +
           " not supported for " + dtype;
  };
  Tensor f = dt::zeros({2});
  Tensor i = dt::zeros({2}, DType::kInt64);
  Tensor b = dt::zeros({2}, DType::kBool);
  REQUIRE_THROWS_WITH(dt::detail::binary_cpu(BinaryOp::kBitAnd, f, f, f),
                      op_text("binary_cpu", BinaryOp::kBitAnd, "float32"));
  REQUIRE_THROWS_WITH(dt::detail::binary_scalar_cpu(BinaryOp::kPow, f, f, dt::Scalar(2.0), false),
                      op_text("binary_cpu", BinaryOp::kPow, "float32"));
  REQUIRE_THROWS_WITH(dt::detail::unary_cpu(UnaryOp::kBitNot, f, f, dt::Scalar(0.0)),
                      op_text("unary_cpu", UnaryOp::kBitNot, "float32"));
  REQUIRE_THROWS_WITH(dt::detail::unary_cpu(UnaryOp::kExp, i, i, dt::Scalar(0.0)),
                      op_text("unary_cpu", UnaryOp::kExp, "int64"));
  REQUIRE_THROWS_WITH(dt::detail::unary_cpu(UnaryOp::kNeg, b, b, dt::Scalar(0.0)),
                      op_text("unary_cpu", UnaryOp::kNeg, "bool"));
}
