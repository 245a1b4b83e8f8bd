// The copying shape ops of copy_ops.h on local tensors against values worked out by hand:
// flip, roll (with and without dims, negative and oversized shifts), repeat / tile, tril / triu
// (diagonals above and below, batches, wide and tall), clone / contiguous, movedim, unflatten,
// unbind, and their errors.
#include <catch2/catch.hpp>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using namespace dtensor::ewtest;

namespace {
// 0, 1, ..., n-1 in `shape`, as int64 (bit-exact comparisons).
Tensor iota(dt::IntSpan shape) {
  return dt::arange(dt::shape_numel(shape)).view(shape);
}
}  // namespace

TEST_CASE("flip and roll move elements as torch does", "[view]") {
  const Tensor x = iota({2, 3});
  check_values(dt::flip(x, {1}), {2, 3}, DType::kInt64, {2, 1, 0, 5, 4, 3}, 0, 0);
  check_values(dt::flip(x, {0, -1}), {2, 3}, DType::kInt64, {5, 4, 3, 2, 1, 0}, 0, 0);
  check_values(dt::flip(x.transpose(0, 1), {0}), {3, 2}, DType::kInt64, {2, 5, 1, 4, 0, 3}, 0, 0);
  check_values(dt::roll(x, {1}, {1}), {2, 3}, DType::kInt64, {2, 0, 1, 5, 3, 4}, 0, 0);
  check_values(dt::roll(x, {-4}, {1}), {2, 3}, DType::kInt64, {1, 2, 0, 4, 5, 3}, 0, 0);
  check_values(dt::roll(x, {2}), {2, 3}, DType::kInt64, {4, 5, 0, 1, 2, 3}, 0, 0);
  check_values(dt::roll(x, {1, 1}, {0, 1}), {2, 3}, DType::kInt64, {5, 3, 4, 2, 0, 1}, 0, 0);
  // Copies, never views of x, even when nothing moves.
  Tensor same = dt::roll(x, {3}, {1});
  same.fill_(7);
  CHECK(x.to_vector<int64_t>()[0] == 0);
  REQUIRE_THROWS_WITH(dt::flip(x, {1, -1}), Catch::Contains("[flip] dim 1 appears more than once"));
  REQUIRE_THROWS_WITH(dt::roll(x, {1, 2}), Catch::Contains("[roll] shifts [1, 2] and dims []"));
}

TEST_CASE("repeat and tile tile the tensor, with leading new dims", "[view]") {
  const Tensor x = iota({2});
  check_values(dt::repeat(x, {2, 3}), {2, 6}, DType::kInt64, {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
               0, 0);
  const Tensor y = iota({2, 2});
  check_values(dt::repeat(y, {1, 2}), {2, 4}, DType::kInt64, {0, 1, 0, 1, 2, 3, 2, 3}, 0, 0);
  check_values(dt::tile(y, {2}), {2, 4}, DType::kInt64, {0, 1, 0, 1, 2, 3, 2, 3}, 0, 0);
  check_values(dt::repeat(y, {0, 1}), {0, 2}, DType::kInt64, {}, 0, 0);
  Tensor once = dt::repeat(y, {1, 1});
  once.fill_(9);
  CHECK(y.to_vector<int64_t>()[0] == 0);
  REQUIRE_THROWS_WITH(dt::repeat(y, {2}), Catch::Contains("[repeat] repeats [2] has fewer"));
}

TEST_CASE("repeat_interleave repeats each element in place", "[view]") {
  const Tensor y = iota({2, 2});
  check_values(dt::repeat_interleave(y, 2, 1), {2, 4}, DType::kInt64, {0, 0, 1, 1, 2, 2, 3, 3}, 0,
               0);
  check_values(dt::repeat_interleave(y, 2, 0), {4, 2}, DType::kInt64, {0, 1, 0, 1, 2, 3, 2, 3}, 0,
               0);
  check_values(dt::repeat_interleave(y, 0, -1), {2, 0}, DType::kInt64, {}, 0, 0);
  REQUIRE_THROWS_WITH(dt::repeat_interleave(y, -1, 0),
                      Catch::Contains("[repeat_interleave] repeats -1 must be >= 0"));
  REQUIRE_THROWS_WITH(dt::repeat_interleave(iota({}), 2, 0),
                      Catch::Contains("[repeat_interleave] argument self is 0-d"));
}

TEST_CASE("diagonal takes any diagonal of any plane, its backward writes it back", "[view]") {
  const Tensor x = iota({3, 4});  // [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
  check_values(dt::diagonal(x), {3}, DType::kInt64, {0, 5, 10}, 0, 0);
  check_values(dt::diagonal(x, 1), {3}, DType::kInt64, {1, 6, 11}, 0, 0);
  check_values(dt::diagonal(x, 3), {1}, DType::kInt64, {3}, 0, 0);
  check_values(dt::diagonal(x, -2), {1}, DType::kInt64, {8}, 0, 0);
  check_values(dt::diagonal(x, 5), {0}, DType::kInt64, {}, 0, 0);
  check_values(dt::diagonal(x, 0, 1, 0), {3}, DType::kInt64, {0, 5, 10}, 0, 0);
  // A batch plane (dims 2, 0) of [2, 2, 3]: the remaining dim leads.
  const Tensor b = iota({2, 2, 3});
  check_values(dt::diagonal(b, 0, 2, 0), {2, 2}, DType::kInt64, {0, 7, 3, 10}, 0, 0);
  check_values(dt::diagonal_backward(dt::arange(1.0, 4.0, 1.0, DType::kInt64), {3, 4}, 1, 0, 1),
               {3, 4}, DType::kInt64, {0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3}, 0, 0);
  REQUIRE_THROWS_WITH(dt::diagonal(x, 0, 1, -1),
                      Catch::Contains("[diagonal] dim1 and dim2 are both dim 1"));
  REQUIRE_THROWS_WITH(dt::diagonal(iota({3})), Catch::Contains("expected at least 2"));
}

TEST_CASE("tril and triu keep the triangles of the last two dims", "[view]") {
  const Tensor x = iota({3, 4}) + 1;
  check_values(dt::tril(x), {3, 4}, DType::kInt64, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}, 0, 0);
  check_values(dt::tril(x, 1), {3, 4}, DType::kInt64, {1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12}, 0,
               0);
  check_values(dt::triu(x, -1), {3, 4}, DType::kInt64, {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}, 0,
               0);
  check_values(dt::triu(x, 2), {3, 4}, DType::kInt64, {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0}, 0, 0);
  const Tensor b = dt::ones({2, 2, 2}, DType::kFloat32);
  check_values(dt::tril(b), {2, 2, 2}, DType::kFloat32, {1, 0, 1, 1, 1, 0, 1, 1}, 0, 0);
  REQUIRE_THROWS_WITH(dt::tril(iota({3})),
                      Catch::Contains("[tril] expected a tensor with at least 2"));
}

TEST_CASE("movedim, unflatten, unbind, clone and contiguous", "[view]") {
  const Tensor x = iota({2, 3, 4});
  CHECK(dt::movedim(x, {0}, {2}).sizes() == dt::Shape{3, 4, 2});
  CHECK(dt::movedim(x, {0, 1}, {2, 0}).sizes() == dt::Shape{3, 4, 2});
  CHECK(dt::equal(dt::movedim(x, {2}, {0}), x.permute({2, 0, 1})));
  CHECK(dt::unflatten(x, 2, {2, -1}).sizes() == dt::Shape{2, 3, 2, 2});
  CHECK(dt::equal(dt::unflatten(x, -1, {4, 1}).reshape({2, 3, 4}), x));
  const std::vector<Tensor> parts = dt::unbind(x, 1);
  REQUIRE(parts.size() == 3);
  CHECK(dt::equal(parts[2], x.select(1, 2)));
  Tensor c = dt::clone(x);
  c.fill_(5);
  CHECK(x.to_vector<int64_t>()[0] == 0);
  CHECK(dt::contiguous(x.transpose(0, 2)).is_contiguous());
  REQUIRE_THROWS_WITH(dt::movedim(x, {0, 0}, {1, 2}), Catch::Contains("[movedim] dim 0 appears"));
  REQUIRE_THROWS_WITH(dt::unflatten(x, 2, {3, -1}), Catch::Contains("[unflatten]"));
}
