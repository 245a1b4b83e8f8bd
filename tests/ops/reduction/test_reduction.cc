// Reductions against references computed in double by the test's own loops (grouping input
// elements by output index), over dtypes, dim lists, keepdim, zero-size and non-contiguous
// inputs.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "dtensor/config.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Shape;
using dt::Tensor;
using namespace dtensor::ewtest;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// The input values grouped by output element (each group in row-major input order) for a
// reduction of `shape` over `dims` (empty = all), and the output shape.
struct Groups {
  Shape out_shape;
  std::vector<std::vector<double>> values;
};

Groups group(const std::vector<double>& v, const Shape& shape, std::vector<int64_t> dims,
             bool keepdim) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<bool> red(nd, dims.empty());
  for (int64_t d : dims) {
    if (nd > 0) red[(d + nd) % nd] = true;
  }
  Groups g;
  for (int64_t d = 0; d < nd; ++d) {
    if (!red[d])
      g.out_shape.push_back(shape[d]);
    else if (keepdim)
      g.out_shape.push_back(1);
  }
  g.values.resize(dt::shape_numel(g.out_shape));
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    const std::vector<int64_t> idx = unravel(i, shape);
    int64_t o = 0;
    for (int64_t d = 0; d < nd; ++d) {
      if (!red[d]) o = o * shape[d] + idx[d];
    }
    g.values[o].push_back(v[i]);
  }
  return g;
}

double ref_sum(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s += e;
  return s;
}
double ref_mean(const std::vector<double>& x) {
  return ref_sum(x) / static_cast<double>(x.size());
}
double ref_var(const std::vector<double>& x, int64_t correction) {
  const double m = ref_mean(x);
  double ss = 0;
  for (double e : x) ss += (e - m) * (e - m);
  return ss / std::max(0.0, static_cast<double>(x.size()) - static_cast<double>(correction));
}
double ref_max(const std::vector<double>& x) {
  double b = x[0];
  for (double e : x) {
    if (std::isnan(e)) return e;
    b = std::max(b, e);
  }
  return b;
}
double ref_min(const std::vector<double>& x) {
  double b = x[0];
  for (double e : x) {
    if (std::isnan(e)) return e;
    b = std::min(b, e);
  }
  return b;
}
// First index of the max (is_max) or min; the first NaN wins.
int64_t ref_arg(const std::vector<double>& x, bool is_max) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return static_cast<int64_t>(i);
  }
  int64_t b = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    if (is_max ? x[i] > x[b] : x[i] < x[b]) b = static_cast<int64_t>(i);
  }
  return b;
}

struct DimCase {
  Shape shape;
  std::vector<int64_t> dims;
};

const std::vector<DimCase> kDimCases = {{{3, 4, 5}, {}},
                                        {{3, 4, 5}, {0}},
                                        {{3, 4, 5}, {1}},
                                        {{3, 4, 5}, {-1}},
                                        {{3, 4, 5}, {0, 2}},
                                        {{3, 4, 5}, {2, 0}},
                                        {{3, 4, 5}, {0, 1, 2}},
                                        {{3, 4, 5}, {1, 2}},
                                        {{7}, {}},
                                        {{7}, {0}},
                                        {{}, {}},
                                        {{}, {0}},
                                        {{1, 5, 1}, {0, 2}},
                                        {{1, 5, 1}, {1}},
                                        {{4, 6}, {0}},
                                        {{2, 0, 3}, {0, 2}},
                                        {{2, 0, 3}, {1}},
                                        {{2, 0, 3}, {}},
                                        {{5, 3}, {-2, -1}}};

bool has_empty_group(const Groups& g) {
  for (const auto& v : g.values) {
    if (v.empty()) return true;
  }
  return false;
}

}  // namespace

TEMPLATE_TEST_CASE("sum, mean, var, amax, amin match double references", "[reduction]", float,
                   double, dt::Half, dt::BFloat16) {
  const DType dtype = dt::dtype_of_v<TestType>;
  const double rtol = rtol_for(dtype);
  uint32_t seed = 1;
  for (const auto& c : kDimCases) {
    const std::vector<double> v = random_values(dt::shape_numel(c.shape), dtype, seed++);
    for (bool keepdim : {false, true}) {
      const Groups g = group(v, c.shape, c.dims, keepdim);
      const int64_t n = g.values.empty() ? 0 : static_cast<int64_t>(g.values[0].size());
      std::vector<double> e_sum, e_mean, e_var0, e_var1, e_max, e_min;
      for (const auto& x : g.values) {
        e_sum.push_back(ref_sum(x));
        e_mean.push_back(ref_mean(x));
        e_var0.push_back(ref_var(x, 0));
        e_var1.push_back(ref_var(x, 1));
        if (!x.empty()) {
          e_max.push_back(ref_max(x));
          e_min.push_back(ref_min(x));
        }
      }
      // The kernel accumulates in double (in another order than the reference) and rounds
      // once: rtol covers the rounding, the absolute part the double reordering error of
      // n terms up to 3 in magnitude.
      const double atol_sum = 1e-15 * 3 * static_cast<double>(n) + atol_for(dtype);
      const double atol_var = 1e-14 * 10 + atol_for(dtype);
      for (const auto& [layout, t] : layouts(make(v, c.shape, dtype))) {
        INFO(dt::dtype_name(dtype)
             << " " << dt::shape_str(c.shape) << " dims " << dt::shape_str(c.dims) << " keepdim "
             << keepdim << " (" << layout << ")");
        check_values(dt::sum(t, c.dims, keepdim), g.out_shape, dtype, e_sum, rtol, atol_sum);
        check_values(dt::mean(t, c.dims, keepdim), g.out_shape, dtype, e_mean, rtol, atol_sum);
        check_values(dt::var(t, c.dims, 0, keepdim), g.out_shape, dtype, e_var0, rtol, atol_var);
        check_values(dt::var(t, c.dims, 1, keepdim), g.out_shape, dtype, e_var1, rtol, atol_var);
        if (!has_empty_group(g)) {
          check_values(dt::amax(t, c.dims, keepdim), g.out_shape, dtype, e_max, 0, 0);
          check_values(dt::amin(t, c.dims, keepdim), g.out_shape, dtype, e_min, 0, 0);
        } else {
          REQUIRE_THROWS_WITH(dt::amax(t, c.dims, keepdim),
                              Catch::Contains("[amax] cannot reduce over zero elements"));
          REQUIRE_THROWS_WITH(dt::amin(t, c.dims, keepdim), Catch::Contains("[amin]"));
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("integer and bool sums give int64, amax/amin keep the dtype", "[reduction]",
                   int32_t, int64_t, bool) {
  const DType dtype = dt::dtype_of_v<TestType>;
  uint32_t seed = 50;
  for (const auto& c : kDimCases) {
    const std::vector<double> v = random_values(dt::shape_numel(c.shape), dtype, seed++, -20, 20);
    for (bool keepdim : {false, true}) {
      const Groups g = group(v, c.shape, c.dims, keepdim);
      std::vector<double> e_sum, e_max, e_min;
      for (const auto& x : g.values) {
        e_sum.push_back(ref_sum(x));
        if (!x.empty()) {
          e_max.push_back(ref_max(x));
          e_min.push_back(ref_min(x));
        }
      }
      for (const auto& [layout, t] : layouts(make(v, c.shape, dtype))) {
        INFO(dt::dtype_name(dtype) << " " << dt::shape_str(c.shape) << " dims "
                                   << dt::shape_str(c.dims) << " (" << layout << ")");
        check_values(dt::sum(t, c.dims, keepdim), g.out_shape, DType::kInt64, e_sum, 0, 0);
        if (!has_empty_group(g)) {
          check_values(dt::amax(t, c.dims, keepdim), g.out_shape, dtype, e_max, 0, 0);
          check_values(dt::amin(t, c.dims, keepdim), g.out_shape, dtype, e_min, 0, 0);
        }
      }
    }
  }
  REQUIRE_THROWS_WITH(dt::mean(dt::zeros({3}, dtype)),
                      Catch::Contains("[mean] expected a floating input") &&
                          Catch::Contains(std::string(dt::dtype_name(dtype))));
  REQUIRE_THROWS_WITH(dt::var(dt::zeros({3}, dtype)), Catch::Contains("[var] expected a floating"));
}

TEMPLATE_TEST_CASE("argmax, argmin and max/min along a dim pick the first extreme", "[reduction]",
                   float, double, dt::Half, dt::BFloat16, int32_t, int64_t) {
  const DType dtype = dt::dtype_of_v<TestType>;
  const std::vector<std::pair<Shape, std::optional<int64_t>>> cases = {
      {{3, 4, 5}, std::nullopt}, {{3, 4, 5}, 0},     {{3, 4, 5}, 1}, {{3, 4, 5}, -1}, {{7}, 0},
      {{7}, std::nullopt},       {{}, std::nullopt}, {{}, 0},        {{0, 3}, 1},     {{4, 1}, 1}};
  uint32_t seed = 200;
  for (const auto& [shape, dim] : cases) {
    // Small integers: many ties.
    const std::vector<double> v =
        random_values(dt::shape_numel(shape), DType::kInt64, seed++, -2, 2);
    for (bool keepdim : {false, true}) {
      std::vector<int64_t> dims;
      if (dim) dims.push_back(*dim);
      const Groups g = group(v, shape, dims, keepdim);
      std::vector<double> e_argmax, e_argmin, e_max, e_min;
      for (const auto& x : g.values) {
        e_argmax.push_back(static_cast<double>(ref_arg(x, true)));
        e_argmin.push_back(static_cast<double>(ref_arg(x, false)));
        e_max.push_back(ref_max(x));
        e_min.push_back(ref_min(x));
      }
      for (const auto& [layout, t] : layouts(make(v, shape, dtype))) {
        INFO(dt::dtype_name(dtype)
             << " " << dt::shape_str(shape) << " dim " << (dim ? std::to_string(*dim) : "none")
             << " keepdim " << keepdim << " (" << layout << ")");
        check_values(dt::argmax(t, dim, keepdim), g.out_shape, DType::kInt64, e_argmax, 0, 0);
        check_values(dt::argmin(t, dim, keepdim), g.out_shape, DType::kInt64, e_argmin, 0, 0);
        if (dim) {
          const dt::ValuesIndices mx = dt::max(t, *dim, keepdim);
          check_values(mx.values, g.out_shape, dtype, e_max, 0, 0);
          check_values(mx.indices, g.out_shape, DType::kInt64, e_argmax, 0, 0);
          const dt::ValuesIndices mn = dt::min(t, *dim, keepdim);
          check_values(mn.values, g.out_shape, dtype, e_min, 0, 0);
          check_values(mn.indices, g.out_shape, DType::kInt64, e_argmin, 0, 0);
        } else if (!keepdim) {
          check_values(dt::max(t), {}, dtype, e_max, 0, 0);
          check_values(dt::min(t), {}, dtype, e_min, 0, 0);
        }
      }
    }
  }
}

TEST_CASE("NaN propagates through max/min and wins argmax/argmin", "[reduction]") {
  Tensor x = make({1, kNaN, 3, kNaN, -1, 2}, {2, 3}, DType::kFloat32);
  check_values(dt::amax(x, {1}), {2}, DType::kFloat32, {kNaN, kNaN}, 0, 0);
  check_values(dt::amin(x, {0}), {3}, DType::kFloat32, {kNaN, kNaN, 2}, 0, 0);
  check_values(dt::max(x), {}, DType::kFloat32, {kNaN}, 0, 0);
  check_values(dt::argmax(x), {}, DType::kInt64, {1}, 0, 0);
  check_values(dt::argmin(x, 0), {3}, DType::kInt64, {1, 0, 1}, 0, 0);
  const dt::ValuesIndices r = dt::max(x, 1);
  check_values(r.values, {2}, DType::kFloat32, {kNaN, kNaN}, 0, 0);
  check_values(r.indices, {2}, DType::kInt64, {1, 0}, 0, 0);
  check_values(dt::sum(x, {0}), {3}, DType::kFloat32, {kNaN, kNaN, 5}, 0, 0);
}

TEST_CASE("reductions over zero elements and corner cases", "[reduction]") {
  Tensor e = dt::zeros({2, 0, 3});
  check_values(dt::sum(e), {}, DType::kFloat32, {0}, 0, 0);
  check_values(dt::sum(e, {1}), {2, 3}, DType::kFloat32, std::vector<double>(6, 0), 0, 0);
  check_values(dt::mean(e, {1}, true), {2, 1, 3}, DType::kFloat32, std::vector<double>(6, kNaN), 0,
               0);
  check_values(dt::sum(dt::zeros({0}, DType::kInt32)), {}, DType::kInt64, {0}, 0, 0);
  REQUIRE_THROWS_WITH(dt::max(e), Catch::Contains("[max] cannot reduce over zero elements") &&
                                      Catch::Contains("[2, 0, 3]"));
  REQUIRE_THROWS_WITH(dt::min(e, 1), Catch::Contains("[min] cannot reduce over zero elements"));
  REQUIRE_THROWS_WITH(dt::argmax(e), Catch::Contains("[argmax]"));
  REQUIRE_THROWS_WITH(dt::argmin(e, 1), Catch::Contains("[argmin]"));
  // Reducing the non-empty dims of an empty tensor gives an empty result, no error.
  CHECK(dt::amax(e, {0, 2}).numel() == 0);
  CHECK(dt::shape_str(dt::argmax(e, 2).sizes()) == "[2, 0]");
  // var: N - correction <= 0 gives NaN (0/0) or inf (x/0).
  Tensor one = make({5}, {1}, DType::kFloat64);
  check_values(dt::var(one), {}, DType::kFloat64, {kNaN}, 0, 0);
  Tensor three = make({1, 2, 4}, {3}, DType::kFloat64);
  check_values(dt::var(three, {}, 3), {}, DType::kFloat64,
               {std::numeric_limits<double>::infinity()}, 0, 0);
  check_values(dt::var(three, {}, 5), {}, DType::kFloat64,
               {std::numeric_limits<double>::infinity()}, 0, 0);
  check_values(dt::var(three), {}, DType::kFloat64, {7.0 / 3.0}, 1e-15, 0);
  // keepdim with all dims.
  CHECK(dt::shape_str(dt::sum(dt::zeros({2, 3}), {}, true).sizes()) == "[1, 1]");
  CHECK(dt::shape_str(dt::argmax(dt::zeros({2, 3}), std::nullopt, true).sizes()) == "[1, 1]");
  // Expanded (stride-0) input.
  Tensor ex = make({1, 2, 3}, {1, 3}, DType::kFloat32).expand({4, 3});
  check_values(dt::sum(ex, {0}), {3}, DType::kFloat32, {4, 8, 12}, 0, 0);
  check_values(dt::sum(ex), {}, DType::kFloat32, {24}, 0, 0);
  check_values(dt::argmax(ex, 0), {3}, DType::kInt64, {0, 0, 0}, 0, 0);
}

TEST_CASE("long contiguous sums accumulate in double", "[reduction]") {
  const int64_t n = 100003;
  std::vector<double> v(n);
  double ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    v[i] = (i % 7 == 0) ? 1e4 : 0.1f;
  }
  v = make(v, {n}, DType::kFloat32).to_vector<double>();
  for (double x : v) ref += x;
  check_values(dt::sum(make(v, {n}, DType::kFloat32)), {}, DType::kFloat32, {ref}, 1e-7, 0);
  check_values(dt::mean(make(v, {n}, DType::kFloat32)), {}, DType::kFloat32,
               {ref / static_cast<double>(n)}, 1e-7, 0);
  // bfloat16 of many ones: a bf16 accumulator would stop at 256.
  check_values(dt::sum(dt::ones({1000}, DType::kBFloat16)), {}, DType::kBFloat16, {1000}, 0, 0);
}

TEST_CASE("reduction errors name the op and the argument", "[reduction]") {
  Tensor x = dt::zeros({2, 3});
  REQUIRE_THROWS_WITH(dt::sum(x, {1, -1}), Catch::Contains("[sum] dim 1 appears more than once"));
  REQUIRE_THROWS_WITH(dt::sum(x, {2}), Catch::Contains("[sum]") && Catch::Contains("out of range"));
  REQUIRE_THROWS_WITH(dt::argmax(x, 5), Catch::Contains("[argmax]"));
  REQUIRE_THROWS_WITH(dt::max(x, -3), Catch::Contains("[max]"));
  REQUIRE_THROWS_WITH(dt::sum(Tensor()), Catch::Contains("[sum] argument self is an undefined"));
  float storage[6] = {};
  Tensor cuda = dt::from_blob(storage, {2, 3}, DType::kFloat32, dt::Device(dt::kCUDA, 0));
  // CUDA inputs dispatch to the CUDA kernels (tests/gpu); without CUDA compiled in they raise.
  if (!DTENSOR_HAVE_CUDA) {
    REQUIRE_THROWS_WITH(dt::sum(cuda), Catch::Contains("CUDA support is not compiled in"));
    REQUIRE_THROWS_WITH(dt::argmax(cuda), Catch::Contains("CUDA support is not compiled in"));
  }
}

TEST_CASE("reductions with an empty kept dim produce empty outputs", "[reduction]") {
  // Regression: the whole-row path divided by the size of an empty kept dim.
  dtensor::Tensor a = dtensor::zeros({2, 0, 3});
  dtensor::Tensor s = dtensor::sum(a, {0});
  REQUIRE(s.shape() == dtensor::Shape{0, 3});
  REQUIRE(dtensor::mean(a, {0}).shape() == dtensor::Shape{0, 3});
  REQUIRE(dtensor::amax(a, {0}).shape() == dtensor::Shape{0, 3});
  // A strided (transposed) view whose innermost kept dim is empty.
  dtensor::Tensor b = dtensor::zeros({0, 13}).transpose(0, 1);  // [13, 0], strides (1, 13)
  REQUIRE(dtensor::sum(b, {0}).shape() == dtensor::Shape{0});
  REQUIRE(dtensor::sum(b, {1}).to_vector<float>() == std::vector<float>(13, 0.0f));
}
