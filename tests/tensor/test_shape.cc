#include <catch2/catch.hpp>

#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"

using namespace dtensor;
using Catch::Contains;

TEST_CASE("shape: numel and contiguous strides", "[shape]") {
  CHECK(shape_numel({}) == 1);
  CHECK(shape_numel({3}) == 3);
  CHECK(shape_numel({2, 3, 5}) == 30);
  CHECK(shape_numel({2, 0, 5}) == 0);
  CHECK(contiguous_strides({}).empty());
  CHECK(contiguous_strides({2, 3, 5}) == Shape{15, 5, 1});
  CHECK(contiguous_strides({7}) == Shape{1});
  // Zero-size dims count as 1 in the strides (PyTorch).
  CHECK(contiguous_strides({2, 0, 5}) == Shape{5, 5, 1});
  CHECK(contiguous_strides({4, 1, 3}) == Shape{3, 3, 1});
}

TEST_CASE("shape: normalize_dim", "[shape]") {
  CHECK(normalize_dim(0, 3, "op") == 0);
  CHECK(normalize_dim(2, 3, "op") == 2);
  CHECK(normalize_dim(-1, 3, "op") == 2);
  CHECK(normalize_dim(-3, 3, "op") == 0);
  CHECK(normalize_dim(0, 0, "op") == 0);  // scalars accept 0 and -1
  CHECK(normalize_dim(-1, 0, "op") == 0);
  REQUIRE_THROWS_AS(normalize_dim(3, 3, "myop"), Error);
  REQUIRE_THROWS_WITH(normalize_dim(3, 3, "myop"),
                      Contains("[myop] dim 3 out of range for a 3-d tensor (expected -3..2)"));
  REQUIRE_THROWS_WITH(normalize_dim(-4, 3, "myop"), Contains("[myop]"));
  REQUIRE_THROWS_WITH(normalize_dim(1, 0, "myop"), Contains("dim 1"));
}

TEST_CASE("shape: broadcast_shapes", "[shape]") {
  CHECK(broadcast_shapes({2, 3}, {3}, "op") == Shape{2, 3});
  CHECK(broadcast_shapes({2, 1}, {1, 4}, "op") == Shape{2, 4});
  CHECK(broadcast_shapes({}, {4, 5}, "op") == Shape{4, 5});
  CHECK(broadcast_shapes({5, 1, 3}, {4, 1}, "op") == Shape{5, 4, 3});
  CHECK(broadcast_shapes({0, 1}, {1, 3}, "op") == Shape{0, 3});
  CHECK(broadcast_shapes({0}, {1}, "op") == Shape{0});
  REQUIRE_THROWS_AS(broadcast_shapes({2, 3}, {4}, "add"), Error);
  REQUIRE_THROWS_WITH(broadcast_shapes({2, 3}, {4}, "add"),
                      Contains("[add] shapes [2, 3] and [4] cannot be broadcast"));
  REQUIRE_THROWS_WITH(broadcast_shapes({0}, {2}, "add"), Contains("[add]"));
}

TEST_CASE("shape: shape_str", "[shape]") {
  CHECK(shape_str({}) == "[]");
  CHECK(shape_str({2, 3}) == "[2, 3]");
  CHECK(shape_str({0}) == "[0]");
}

TEST_CASE("shape: chunk_bounds follows torch.chunk", "[shape]") {
  const int64_t n = GENERATE(0, 1, 4, 5, 7, 13, 16);
  const int64_t k = GENERATE(1, 2, 3, 4, 8);
  const int64_t chunk = (n + k - 1) / k;
  int64_t covered = 0;
  for (int64_t i = 0; i < k; ++i) {
    const ChunkBounds b = chunk_bounds(n, k, i);
    // Naive: chunk i covers [i*chunk, (i+1)*chunk) intersected with [0, n).
    int64_t lo = i * chunk;
    int64_t hi = (i + 1) * chunk;
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    INFO("n=" << n << " k=" << k << " i=" << i);
    CHECK(b.offset == lo);
    CHECK(b.size == hi - lo);
    CHECK(b.size >= 0);
    CHECK(b.offset == covered);
    covered += b.size;
  }
  CHECK(covered == n);
  // The worked example of the header: 5 over 4 gives 2, 2, 1, 0.
  CHECK(chunk_bounds(5, 4, 2).size == 1);
  CHECK(chunk_bounds(5, 4, 3).size == 0);
  CHECK(chunk_bounds(5, 4, 3).offset == 5);
  static_assert(chunk_bounds(10, 3, 2).offset == 8 && chunk_bounds(10, 3, 2).size == 2);
}
