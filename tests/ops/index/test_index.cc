// Indexing on local tensors against values worked out by hand: gather, index_select,
// take_along_dim, one_hot, masked_fill, and their errors.
#include <catch2/catch.hpp>

#include "ops/elementwise/elementwise.h"
#include "ops/index/index.h"
#include "tensor/creation.h"
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
  check_values(dt::scatter(x, 1, ints({2, 2, 0, 1}, {2, 2}), make({20, 30, 40, 50}, {2, 2},
                                                                    DType::kFloat64)),
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
