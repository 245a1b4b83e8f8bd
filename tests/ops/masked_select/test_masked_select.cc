// masked_select / nonzero / masked_select_backward on local tensors against references written
// from their definitions: every dtype, broadcasting both ways, strided inputs, empty tensors,
// masks selecting nothing and everything, and the errors.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/ops/masked_select/detail/masked_select.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Shape;
using dt::Tensor;
using namespace dtensor::ewtest;

namespace {

// masked_select from its definition: the broadcast shape's elements in row-major order where
// the broadcast mask is true.
std::vector<double> reference(const std::vector<double>& self, dt::IntSpan self_shape,
                              const std::vector<double>& mask, dt::IntSpan mask_shape,
                              dt::IntSpan shape) {
  std::vector<double> out;
  for (int64_t i = 0; i < dt::shape_numel(shape); ++i) {
    if (mask[broadcast_source(i, shape, mask_shape)] != 0) {
      out.push_back(self[broadcast_source(i, shape, self_shape)]);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("masked_select equals its definition for every dtype, broadcast and layout",
          "[index][masked_select]") {
  struct Case {
    Shape self, mask;
  };
  const std::vector<Case> cases = {{{4, 5}, {4, 5}},    {{4, 1}, {3}},    {{3}, {2, 4, 3}},
                                   {{2, 1, 3}, {4, 1}}, {{}, {3}},        {{7}, {}},
                                   {{0, 3}, {0, 3}},    {{0, 3}, {1, 3}}, {{5, 6}, {5, 6}}};
  uint32_t seed = 1;
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                      DType::kInt32, DType::kInt64, DType::kBool}) {
    for (const Case& c : cases) {
      const Shape shape = dt::broadcast_shapes(c.self, c.mask, "test");
      const auto sv = random_values(dt::shape_numel(c.self), dtype, seed++);
      const auto mv = random_values(dt::shape_numel(c.mask), DType::kBool, seed++);
      const Tensor mask = make(mv, c.mask, DType::kBool);
      const std::vector<double> want = reference(sv, c.self, mv, c.mask, shape);
      for (const auto& [layout, self] : layouts(make(sv, c.self, dtype))) {
        INFO(dt::dtype_name(dtype) << " self " << dt::shape_str(c.self) << " (" << layout
                                   << ") mask " << dt::shape_str(c.mask));
        const Tensor got = dt::masked_select(self, mask);
        check_values(got, {static_cast<int64_t>(want.size())}, dtype, want, 0, 0);
      }
    }
  }
}

TEST_CASE("masked_select with masks selecting nothing and everything", "[index][masked_select]") {
  const Tensor x = make({1, -2, 3, -4, 5, 6}, {2, 3}, DType::kFloat32);
  const Tensor none = dt::zeros({2, 3}, dt::TensorOptions(DType::kBool));
  const Tensor all = dt::ones({3}, dt::TensorOptions(DType::kBool));
  const Tensor a = dt::masked_select(x, none);
  CHECK(a.sizes() == Shape{0});
  CHECK(a.dtype() == DType::kFloat32);
  check_values(dt::masked_select(x, all), {6}, DType::kFloat32, {1, -2, 3, -4, 5, 6}, 0, 0);
  // The mask broadcast along self's rows selects the same column of each row.
  const Tensor col = make({0, 1, 0}, {3}, DType::kBool);
  check_values(dt::masked_select(x, col), {2}, DType::kFloat32, {-2, 5}, 0, 0);
  // self broadcast along the mask's rows: the elements repeat.
  const Tensor rows = make({1, 0, 1, 1, 1, 0}, {2, 3}, DType::kBool);
  check_values(dt::masked_select(make({7, 8, 9}, {3}, DType::kInt64), rows), {4}, DType::kInt64,
               {7, 9, 7, 8}, 0, 0);
}

TEST_CASE("nonzero gives the coordinates of the nonzero elements in row-major order",
          "[index][masked_select]") {
  const double nan = std::nan("");
  const Tensor x = make({0, 1.5, -0.0, nan, 0, -2}, {2, 3}, DType::kFloat64);
  check_values(dt::nonzero(x), {3, 2}, DType::kInt64, {0, 1, 1, 0, 1, 2}, 0, 0);
  CHECK(dt::nonzero(dt::zeros({4, 2})).sizes() == Shape{0, 2});
  check_values(dt::nonzero(make({1, 0, 1}, {3}, DType::kBool)), {2, 1}, DType::kInt64, {0, 2}, 0,
               0);
  CHECK(dt::nonzero(dt::full({}, 3.0)).sizes() == Shape{1, 0});
  CHECK(dt::nonzero(dt::zeros({})).sizes() == Shape{0, 0});
  CHECK(dt::nonzero(dt::zeros({0, 3})).sizes() == Shape{0, 2});
  // Against the definition, every dtype, 3-d.
  uint32_t seed = 50;
  for (DType dtype :
       {DType::kFloat32, DType::kBFloat16, DType::kInt32, DType::kInt64, DType::kBool}) {
    const Shape shape = {3, 4, 5};
    const auto v = random_values(60, dtype, seed++, -1.4, 1.4);
    std::vector<double> want;
    int64_t n = 0;
    for (int64_t i = 0; i < 60; ++i) {
      if (v[i] == 0) continue;
      ++n;
      for (int64_t c : unravel(i, shape)) want.push_back(static_cast<double>(c));
    }
    INFO(dt::dtype_name(dtype));
    check_values(dt::nonzero(make(v, shape, dtype)), {n, 3}, DType::kInt64, want, 0, 0);
  }
}

TEST_CASE("masked_select_backward scatters the gradient at the mask's true positions",
          "[index][masked_select]") {
  const Tensor mask = make({1, 0, 1}, {3}, DType::kBool);
  const Tensor grad = make({1, 2, 3, 4}, {4}, DType::kFloat32);
  const int64_t shape[] = {2, 3};
  check_values(dt::detail::masked_select_backward(grad, mask, shape), {2, 3}, DType::kFloat32,
               {1, 0, 2, 3, 0, 4}, 0, 0);
  const Tensor none = dt::detail::masked_select_backward(
      dt::zeros({0}), dt::zeros({2, 3}, dt::TensorOptions(DType::kBool)), shape);
  check_values(none, {2, 3}, DType::kFloat32, {0, 0, 0, 0, 0, 0}, 0, 0);
  CHECK_THROWS_WITH(dt::detail::masked_select_backward(dt::zeros({3}), mask, shape),
                    Catch::Contains("[masked_select_backward] argument grad has shape [3]"));
}

TEST_CASE("masked_select errors name the op and the argument", "[index][masked_select]") {
  const Tensor x = dt::zeros({2, 3});
  CHECK_THROWS_WITH(
      dt::masked_select(x, dt::zeros({2, 3}, dt::TensorOptions(DType::kInt64))),
      Catch::Contains("[masked_select] argument mask has dtype int64, expected bool"));
  CHECK_THROWS_WITH(dt::masked_select(x, dt::zeros({4}, dt::TensorOptions(DType::kBool))),
                    Catch::Contains("[masked_select]") && Catch::Contains("broadcast"));
}
