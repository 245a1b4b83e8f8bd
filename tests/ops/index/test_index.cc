// Indexing on local tensors against values worked out by hand: gather, index_select,
// take_along_dim, one_hot, masked_fill, scatter, scatter_reduce (also against a reference written
// from its definition), and their errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string_view>
#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/tensor/creation.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using namespace dtensor::ewtest;

namespace {
Tensor ints(const std::vector<double>& v, dt::IntSpan shape) {
  return make(v, shape, DType::kInt64);
}
}  // namespace

TEST_CASE("gather, index_select and take_along_dim pick by index", "[index]") {
  const Tensor x = make({10, 11, 12, 20, 21, 22}, {2, 3}, DType::kFloat32);
  check_values(dt::gather(x, 1, ints({2, 0, 1, 1}, {2, 2})), {2, 2}, DType::kFloat32,
               {12, 10, 21, 21}, 0, 0);
  check_values(dt::index_select(x, 1, ints({2, 2, 0}, {3})), {2, 3}, DType::kFloat32,
               {12, 12, 10, 22, 22, 20}, 0, 0);
  check_values(dt::index_select(x, 0, ints({1}, {1})), {1, 3}, DType::kFloat32, {20, 21, 22}, 0, 0);
  check_values(dt::index_select(x.transpose(0, 1), 0, ints({0}, {})), {1, 2}, DType::kFloat32,
               {10, 20}, 0, 0);
  // take_along_dim broadcasts: one index row for both rows of x.
  check_values(dt::take_along_dim(x, ints({1, 0}, {1, 2}), 1), {2, 2}, DType::kFloat32,
               {11, 10, 21, 20}, 0, 0);
  REQUIRE_THROWS_WITH(dt::index_select(x, 1, ints({3}, {1})),
                      Catch::Contains("[gather] index 3 out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(dt::index_select(x, 1, ints({0, 1}, {1, 2})),
                      Catch::Contains("[index_select] argument index must be 0-d or 1-d"));
  REQUIRE_THROWS_WITH(dt::take_along_dim(x, ints({0}, {1}), 0),
                      Catch::Contains("[take_along_dim] self (shape [2, 3]) and indices"));
}

TEST_CASE("one_hot and masked_fill", "[index]") {
  check_values(dt::one_hot(ints({2, 0, 1}, {3})), {3, 3}, DType::kInt64,
               {0, 0, 1, 1, 0, 0, 0, 1, 0}, 0, 0);
  check_values(dt::one_hot(ints({1, 0}, {2, 1}), 3), {2, 1, 3}, DType::kInt64, {0, 1, 0, 1, 0, 0},
               0, 0);
  REQUIRE_THROWS_WITH(dt::one_hot(ints({3}, {1}), 3),
                      Catch::Contains("[one_hot] class 3 out of range for 3 classes"));
  REQUIRE_THROWS_WITH(dt::one_hot(make({1}, {1}, DType::kFloat32)),
                      Catch::Contains("[one_hot] argument self has dtype float32"));
  const Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kFloat64);
  const Tensor row = make({1, 0, 1}, {3}, DType::kBool);
  check_values(dt::masked_fill(x, row, -1.5), {2, 3}, DType::kFloat64,
               {-1.5, 2, -1.5, -1.5, 5, -1.5}, 0, 0);
  const Tensor i = ints({1, 2, 3}, {3});
  check_values(dt::masked_fill(i, row, 7), {3}, DType::kInt64, {7, 2, 7}, 0, 0);
  REQUIRE_THROWS_WITH(dt::masked_fill(x, x, 0), Catch::Contains("[masked_fill] argument mask has "
                                                                "dtype float64, expected bool"));
  REQUIRE_THROWS_WITH(dt::masked_fill(row, dt::zeros({2, 3}, DType::kBool), 0),
                      Catch::Contains("[masked_fill] mask of shape [2, 3] does not broadcast"));
}

TEST_CASE("index_add adds alpha * source slices at the indices, repeats accumulating", "[index]") {
  const Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kFloat64);
  const Tensor src = make({10, 20, 30, 40}, {2, 2}, DType::kFloat64);
  check_values(dt::index_add(x, 1, ints({2, 2}, {2}), src, 0.5), {2, 3}, DType::kFloat64,
               {1, 2, 3 + 15, 4, 5, 6 + 35}, 0, 0);
  check_values(dt::index_add(x, 0, ints({1}, {1}), make({7, 8, 9}, {1, 3}, DType::kFloat64)),
               {2, 3}, DType::kFloat64, {1, 2, 3, 11, 13, 15}, 0, 0);
  REQUIRE_THROWS_WITH(dt::index_add(x, 1, ints({3}, {1}), make({1, 1}, {2, 1}, DType::kFloat64)),
                      Catch::Contains("[scatter_add] index 3 out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(dt::index_add(x, 1, ints({0, 1}, {2}), src.narrow(0, 0, 1)),
                      Catch::Contains("[index_add] source has shape [1, 2], expected [2, 2]"));
}

TEST_CASE("scatter writes src or a value at the indices, the last repeat winning", "[index]") {
  const Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kFloat64);
  // Row 0 names column 2 twice: the later entry (30) wins; row 1 writes column 0.
  check_values(dt::scatter(x, 1, ints({2, 2, 0, 1}, {2, 2}),
                           make({20, 30, 40, 50}, {2, 2}, DType::kFloat64)),
               {2, 3}, DType::kFloat64, {1, 2, 30, 40, 50, 6}, 0, 0);
  check_values(dt::scatter(x, 0, ints({1, 0}, {1, 2}), dt::Scalar(-1.0)), {2, 3}, DType::kFloat64,
               {1, -1, 3, -1, 5, 6}, 0, 0);
  // A block of a tensor sharded along dim 1 starting at column 2: only index 2 lands (at 0).
  check_values(dt::scatter(x.narrow(1, 2, 1).contiguous(), 1, ints({2, 0, 1, 2}, {2, 2}),
                           make({20, 30, 40, 50}, {2, 2}, DType::kFloat64), 2),
               {2, 1}, DType::kFloat64, {20, 50}, 0, 0);
  REQUIRE_THROWS_WITH(dt::scatter(x, 1, ints({3}, {1, 1}), dt::Scalar(0.0)),
                      Catch::Contains("[scatter] index 3 out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(dt::scatter(x, 1, ints({0}, {1, 1}), make({1, 2}, {1, 2}, DType::kFloat64)),
                      Catch::Contains("[scatter] argument src has shape [1, 2]"));
}

namespace {

const char* const kReductions[] = {"sum", "prod", "mean", "amax", "amin"};

// scatter_reduce from its definition, in double: every position named by the index gets the
// reduction of self's value there (when include_self) and the src entries naming it.
std::vector<double> scatter_reduce_reference(const Tensor& self, int64_t dim, const Tensor& index,
                                             const Tensor& src, std::string_view reduce,
                                             bool include_self) {
  std::vector<double> out = self.to_vector<double>();
  const std::vector<double> idx = index.to_vector<double>(), values = src.to_vector<double>();
  std::vector<std::vector<double>> named(out.size());
  for (int64_t p = 0; p < index.numel(); ++p) {
    std::vector<int64_t> c = unravel(p, index.sizes());
    c[dim] = static_cast<int64_t>(idx[p]);
    int64_t at = 0;
    for (int64_t k = 0; k < self.dim(); ++k) at = at * self.size(k) + c[k];
    named[at].push_back(values[p]);
  }
  const bool integer = !dt::is_floating(self.dtype());
  for (size_t at = 0; at < out.size(); ++at) {
    if (named[at].empty()) continue;
    std::vector<double> v = named[at];
    if (include_self) v.insert(v.begin(), out[at]);
    double r = reduce == "prod" ? 1.0 : 0.0;
    bool nan = false;
    for (double x : v) nan |= std::isnan(x);
    if (reduce == "sum" || reduce == "mean") {
      for (double x : v) r += x;
      if (reduce == "mean") {
        r /= static_cast<double>(v.size());
        if (integer) r = std::floor(r);
      }
    } else if (reduce == "prod") {
      for (double x : v) r *= x;
    } else if (nan) {
      r = std::nan("");
    } else {
      r = reduce == "amax" ? *std::max_element(v.begin(), v.end())
                           : *std::min_element(v.begin(), v.end());
    }
    out[at] = r;
  }
  return out;
}

// An index of `shape` with values in [0, size): repeats included.
Tensor random_index(dt::IntSpan shape, int64_t size, uint32_t seed) {
  std::vector<double> v = random_values(dt::shape_numel(shape), DType::kInt64, seed, 0,
                                        static_cast<double>(size) - 0.5);
  for (double& x : v) x = std::clamp(x, 0.0, static_cast<double>(size - 1));
  return ints(v, shape);
}

}  // namespace

TEST_CASE("scatter_reduce equals its definition for every reduction, dtype and rank", "[index]") {
  struct Case {
    dt::Shape self, index;
    int64_t dim;
  };
  const std::vector<Case> cases = {
      {{7}, {12}, 0},             // 1-D, many repeats
      {{4, 5}, {3, 9}, 1},        // 2-D along the last dim
      {{5, 3}, {8, 2}, 0},        // 2-D along dim 0, index narrower than self
      {{3, 4, 5}, {2, 6, 3}, 1},  // 3-D along the middle dim
      {{2, 3, 4}, {2, 3, 7}, -1},
      {{4, 5}, {4, 0}, 1},  // empty index: a copy of self
      {{0, 3}, {0, 2}, 1},  // empty self and index
  };
  const DType dtype = GENERATE(DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64,
                               DType::kFloat16, DType::kBFloat16);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const int64_t nd = static_cast<int64_t>(c.self.size());
    const int64_t d = c.dim < 0 ? c.dim + nd : c.dim;
    const Tensor self = make(random_values(dt::shape_numel(c.self), dtype, 10 + ci), c.self, dtype);
    const Tensor src =
        make(random_values(dt::shape_numel(c.index), dtype, 20 + ci), c.index, dtype);
    const Tensor index = random_index(c.index, std::max<int64_t>(c.self[d], 1), 30 + ci);
    for (const char* reduce : kReductions) {
      for (bool include_self : {true, false}) {
        INFO("case " << ci << " " << dt::dtype_name(dtype) << " " << reduce << " include_self "
                     << include_self);
        std::vector<double> want =
            scatter_reduce_reference(self, d, index, src, reduce, include_self);
        for (double& x : want) x = round_to(x, dtype);
        const Tensor got = dt::scatter_reduce(self, c.dim, index, src, reduce, include_self);
        // Reduced in float for 16-bit types, in the dtype for float32: a few roundings, each
        // relative to the partial sums (values are O(3), so an absolute term covers cancellation).
        check_values(got, c.self, dtype, want, 4 * rtol_for(dtype), 40 * rtol_for(dtype));
      }
    }
  }
}

TEST_CASE("scatter_reduce worked examples: untouched positions, include_self, NaN, integer mean",
          "[index]") {
  const Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kFloat64);
  // Row 0 names column 0 twice and column 2 once; row 1 names column 1 three times.
  const Tensor idx = ints({0, 0, 2, 1, 1, 1}, {2, 3});
  const Tensor src = make({10, 20, 30, 7, 8, 9}, {2, 3}, DType::kFloat64);
  const auto run = [&](const char* r, bool self) {
    return dt::scatter_reduce(x, 1, idx, src, r, self);
  };
  check_values(run("sum", true), {2, 3}, DType::kFloat64, {31, 2, 33, 4, 29, 6}, 0, 0);
  check_values(run("sum", false), {2, 3}, DType::kFloat64, {30, 2, 30, 4, 24, 6}, 0, 0);
  check_values(run("prod", true), {2, 3}, DType::kFloat64, {200, 2, 90, 4, 2520, 6}, 0, 0);
  check_values(run("prod", false), {2, 3}, DType::kFloat64, {200, 2, 30, 4, 504, 6}, 0, 0);
  check_values(run("mean", true), {2, 3}, DType::kFloat64, {31.0 / 3, 2, 16.5, 4, 29.0 / 4, 6},
               1e-15, 0);
  check_values(run("mean", false), {2, 3}, DType::kFloat64, {15, 2, 30, 4, 8, 6}, 0, 0);
  check_values(run("amax", true), {2, 3}, DType::kFloat64, {20, 2, 30, 4, 9, 6}, 0, 0);
  check_values(run("amin", true), {2, 3}, DType::kFloat64, {1, 2, 3, 4, 5, 6}, 0, 0);
  check_values(run("amin", false), {2, 3}, DType::kFloat64, {10, 2, 30, 4, 7, 6}, 0, 0);
  // NaN propagates through amax / amin, from src or from self; an untouched NaN stays.
  const double nan = std::nan("");
  const Tensor y = make({nan, 1, 2, nan}, {4}, DType::kFloat32);
  const Tensor v = make({5, nan, 3}, {3}, DType::kFloat32);
  check_values(dt::scatter_reduce(y, 0, ints({0, 1, 2}, {3}), v, "amax"), {4}, DType::kFloat32,
               {nan, nan, 3, nan}, 0, 0);
  check_values(dt::scatter_reduce(y, 0, ints({0, 1, 2}, {3}), v, "amin", false), {4},
               DType::kFloat32, {5, nan, 3, nan}, 0, 0);
  // Integer mean rounds down: (-7 + 0) / 2 = -3.5 -> -4, (5 + 2 + 2) / 3 = 3, 7 / 2 -> 3.
  const Tensor a = make({-7, 5, 7}, {3}, DType::kInt32);
  check_values(dt::scatter_reduce(a, 0, ints({0, 1, 1, 2}, {4}),
                                  make({0, 2, 2, 0}, {4}, DType::kInt32), "mean"),
               {3}, DType::kInt32, {-4, 3, 3}, 0, 0);
  check_values(dt::scatter_reduce(a, 0, ints({0, 0}, {2}), make({-3, -4}, {2}, DType::kInt64),
                                  "mean", false),
               {3}, DType::kInt32, {-4, 5, 7}, 0, 0);
  // A block of a tensor sharded along dim 1 starting at column 1: only indices 1 and 2 land.
  check_values(dt::scatter_reduce(x.narrow(1, 1, 2).contiguous(), 1, idx, src, "sum", true, 1),
               {2, 2}, DType::kFloat64, {2, 33, 29, 6}, 0, 0);
}

TEST_CASE("scatter_reduce errors name the op and the argument", "[index]") {
  const Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kFloat64);
  const Tensor src = make({1, 2}, {1, 2}, DType::kFloat64);
  REQUIRE_THROWS_WITH(
      dt::scatter_reduce(x, 1, ints({0, 1}, {1, 2}), src, "max"),
      Catch::Contains("[scatter_reduce] reduce must be one of sum, prod, mean, amax, amin, got "
                      "'max'"));
  REQUIRE_THROWS_WITH(dt::scatter_reduce(x, 1, ints({0, 3}, {1, 2}), src, "sum"),
                      Catch::Contains("[scatter_reduce] index 3 out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(
      dt::scatter_reduce(x, 1, ints({0, -1}, {1, 2}), src, "amax", false),
      Catch::Contains("[scatter_reduce] index -1 out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(dt::scatter_reduce(x, 1, ints({0}, {1, 1}), src, "prod"),
                      Catch::Contains("[scatter_reduce] argument src has shape [1, 2]"));
  REQUIRE_THROWS_WITH(dt::scatter_reduce(x, 0, ints({0, 0, 0, 0}, {1, 4}),
                                         make({1, 2, 3, 4}, {1, 4}, DType::kFloat64), "sum"),
                      Catch::Contains("[scatter_reduce] index of shape [1, 4] is larger than "
                                      "shape [2, 3] at dim 1"));
  REQUIRE_THROWS_WITH(dt::scatter_reduce(x, 2, ints({0, 1}, {1, 2}), src, "sum"),
                      Catch::Contains("scatter_reduce"));
  REQUIRE_THROWS_WITH(dt::scatter_reduce(x, 1, make({0, 1}, {1, 2}, DType::kFloat32), src, "sum"),
                      Catch::Contains("[scatter_reduce] argument index has dtype float32"));
  const Tensor b = make({1, 0}, {2}, DType::kBool);
  REQUIRE_THROWS_WITH(dt::scatter_reduce(b, 0, ints({0}, {1}), make({1}, {1}, DType::kBool), "sum"),
                      Catch::Contains("[scatter_reduce] argument self has dtype bool"));
}
