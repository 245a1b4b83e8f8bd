#include <catch2/catch.hpp>

#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape_ops.h"
#include "test_util.h"

using namespace dtensor;
using namespace dtensor::test;
using Catch::Contains;

TEST_CASE("shape_ops: cat along every dim, uneven and empty pieces", "[shape_ops]") {
  const int64_t dim = GENERATE(0, 1, 2, -1);
  const int64_t d = dim < 0 ? dim + 3 : dim;
  const DType dt = GENERATE(kFloat32, kBFloat16, kInt32, kBool);
  Tensor full_t = iota({5, 4, 3}, dt);
  const int64_t n = full_t.size(d);
  // Split at uneven boundaries, including an empty piece, and reassemble (non-contiguous
  // pieces: narrow views of a transposed copy).
  std::vector<Tensor> parts;
  int64_t off = 0;
  for (int64_t len : {int64_t{1}, int64_t{0}, n - 1}) {
    parts.push_back(full_t.narrow(d, off, len));
    off += len;
  }
  Tensor c = cat(parts, dim);
  CHECK(c.sizes() == full_t.sizes());
  CHECK(c.dtype() == dt);
  CHECK(equal(c, full_t));
  CHECK(naive_values(cat({full_t.transpose(0, 1).narrow(0, 0, 2)}, 0)) ==
        naive_values(full_t.transpose(0, 1).narrow(0, 0, 2)));
}

TEST_CASE("shape_ops: cat values against a naive reference", "[shape_ops]") {
  Tensor a = iota({2, 3});
  Tensor b = iota({2, 2}).transpose(0, 1);  // [[0, 2], [1, 3]]
  Tensor c = cat({a, b}, 1);
  CHECK(c.sizes() == Shape{2, 5});
  CHECK(naive_values(c) == std::vector<double>{0, 1, 2, 0, 2, 3, 4, 5, 1, 3});
  CHECK(cat({a, a}, 0).sizes() == Shape{4, 3});
  // Legacy: 1-d empty tensors are skipped whatever their dtype-compatible shape.
  CHECK(equal(cat({zeros({0}), a, zeros({0})}, 1), a));
  CHECK(cat({zeros({0}), zeros({0})}, 0).sizes() == Shape{0});
  CHECK(cat({zeros({0, 3}), a}, 0).sizes() == Shape{2, 3});
  REQUIRE_THROWS_WITH(cat({}, 0), Contains("[cat] tensors is empty"));
  REQUIRE_THROWS_WITH(cat({a, iota({3, 3})}, 1), Contains("[cat] tensors[1] has shape [3, 3]"));
  REQUIRE_THROWS_WITH(cat({a, iota({6})}, 0), Contains("[cat] tensors[1]"));
  REQUIRE_THROWS_WITH(cat({a, a}, 2), Contains("[cat] dim 2 out of range"));
  REQUIRE_THROWS_WITH(cat({full({}, 1.0)}, 0), Contains("[cat] zero-dimensional"));
  REQUIRE_THROWS_WITH(cat({a, Tensor()}, 0), Contains("[cat] tensors[1] is undefined"));
}

TEST_CASE("shape_ops: cat and stack promote mixed dtypes as torch.cat / torch.stack",
          "[shape_ops]") {
  // torch 2.15: torch.cat([ones(1, dtype=A), ones(1, dtype=B)]).dtype, rows A and columns B in
  // DType order (float32, float64, float16, bfloat16, int32, int64, bool); torch.stack's table
  // is the same. Before, a mixed list raised "[cat] tensors[1] has dtype ...".
  const DType kAll[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool};
  const DType kTorch[7][7] = {
      {kFloat32, kFloat64, kFloat32, kFloat32, kFloat32, kFloat32, kFloat32},
      {kFloat64, kFloat64, kFloat64, kFloat64, kFloat64, kFloat64, kFloat64},
      {kFloat32, kFloat64, kFloat16, kFloat32, kFloat16, kFloat16, kFloat16},
      {kFloat32, kFloat64, kFloat32, kBFloat16, kBFloat16, kBFloat16, kBFloat16},
      {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kInt32},
      {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt64, kInt64},
      {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool}};
  for (int i = 0; i < 7; ++i) {
    for (int j = 0; j < 7; ++j) {
      INFO(dtype_name(kAll[i]) << " with " << dtype_name(kAll[j]));
      const Tensor a = ones({1}, kAll[i]);
      const Tensor b = ones({1}, kAll[j]);
      const Tensor c = cat({a, b});
      CHECK(c.dtype() == kTorch[i][j]);
      CHECK(naive_values(c) == std::vector<double>{1, 1});
      CHECK(stack({a, b}).dtype() == kTorch[i][j]);
    }
  }
  // Values (torch 2.15): each input converted to the common dtype.
  const Tensor h = cat({from_vector<double>({1.1, -2.5}, {2}).to(kFloat16),
                        from_vector<double>({1.1}, {1}).to(kBFloat16)});
  CHECK(h.dtype() == kFloat32);
  CHECK(naive_values(h) == std::vector<double>{1.099609375, -2.5, 1.1015625});
  const Tensor f = cat({from_vector<int64_t>({3, -4}, {2}), from_vector<float>({0.5f}, {1})});
  CHECK(f.dtype() == kFloat32);
  CHECK(naive_values(f) == std::vector<double>{3, -4, 0.5});
  const Tensor i = cat({from_vector<double>({1, 0}, {2}).to(kBool), full({1}, 7.0, kInt32)});
  CHECK(i.dtype() == kInt32);
  CHECK(naive_values(i) == std::vector<double>{1, 0, 7});
  const Tensor d = cat({from_vector<float>({0.1f}, {1}), from_vector<double>({0.1}, {1})});
  CHECK(d.dtype() == kFloat64);
  CHECK(naive_values(d) == std::vector<double>{0.10000000149011612, 0.1});
  // A skipped 1-d empty input still takes part in the promotion, as in torch.cat.
  const Tensor e = cat({zeros({0}, kFloat64), from_vector<float>({0.1f, 0.2f}, {1, 2})});
  CHECK(e.dtype() == kFloat64);
  CHECK(naive_values(e) == std::vector<double>{0.10000000149011612, 0.20000000298023224});
  const Tensor s =
      stack({from_vector<double>({1, 0}, {2}).to(kBool), from_vector<int64_t>({3, 4}, {2})}, 1);
  CHECK(s.dtype() == kInt64);
  CHECK(naive_values(s) == std::vector<double>{1, 3, 0, 4});
}

TEST_CASE("shape_ops: stack", "[shape_ops]") {
  Tensor a = iota({2, 3});
  Tensor b = full({2, 3}, 9.0);
  Tensor s0 = stack({a, b}, 0);
  CHECK(s0.sizes() == Shape{2, 2, 3});
  CHECK(naive_values(s0) == std::vector<double>{0, 1, 2, 3, 4, 5, 9, 9, 9, 9, 9, 9});
  Tensor s2 = stack({a, b}, -1);
  CHECK(s2.sizes() == Shape{2, 3, 2});
  CHECK(naive_values(s2) == std::vector<double>{0, 9, 1, 9, 2, 9, 3, 9, 4, 9, 5, 9});
  CHECK(stack({full({}, 1.0), full({}, 2.0)}).sizes() == Shape{2});
  CHECK(stack({zeros({0, 2}), zeros({0, 2})}, 1).sizes() == Shape{0, 2, 2});
  REQUIRE_THROWS_WITH(stack({a, iota({3, 2})}), Contains("[stack] tensors[1] has shape [3, 2]"));
  REQUIRE_THROWS_WITH(stack({a}, 3), Contains("[stack] dim 3"));
  REQUIRE_THROWS_AS(stack({}), Error);
}

TEST_CASE("shape_ops: chunk follows torch.chunk and returns views", "[shape_ops]") {
  const int64_t n = GENERATE(0, 1, 5, 6, 7, 13);
  const int64_t k = GENERATE(1, 2, 3, 4, 6);
  Tensor x = iota({3, n});
  std::vector<Tensor> parts = chunk(x, k, 1);
  // torch.chunk: pieces of ceil(n/k); ceil(n / ceil(n/k)) of them; k empty ones when n == 0.
  const int64_t cs = (n + k - 1) / k;
  const int64_t expected_count = n == 0 ? k : (n + cs - 1) / cs;
  INFO("n=" << n << " k=" << k);
  REQUIRE(static_cast<int64_t>(parts.size()) == expected_count);
  int64_t off = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const ChunkBounds b = chunk_bounds(n, k, static_cast<int64_t>(i));
    CHECK(parts[i].storage().is_same(x.storage()));
    CHECK(parts[i].size(1) == b.size);
    CHECK(parts[i].size(0) == 3);
    CHECK(equal(parts[i], x.narrow(1, off, b.size).contiguous()));
    off += b.size;
  }
  CHECK(off == n);
  CHECK(equal(cat(parts, 1), x));
}

TEST_CASE("shape_ops: chunk and split errors and examples", "[shape_ops]") {
  Tensor y = iota({5, 2});
  auto parts = chunk(y, 4, 0);  // 2, 2, 1
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].sizes() == Shape{1, 2});
  CHECK(naive_values(parts[2]) == std::vector<double>{8, 9});
  REQUIRE_THROWS_WITH(chunk(y, 0), Contains("[chunk] chunks 0 must be positive"));
  REQUIRE_THROWS_WITH(chunk(y, 2, 2), Contains("[chunk] dim 2"));
  REQUIRE_THROWS_AS(chunk(full({}, 1.0), 2), Error);

  auto s = split(iota({7}), 3);
  REQUIRE(s.size() == 3);
  CHECK(naive_values(s[0]) == std::vector<double>{0, 1, 2});
  CHECK(naive_values(s[2]) == std::vector<double>{6});
  CHECK(split(iota({6}), 3).size() == 2);
  CHECK(split(iota({6}), 10).size() == 1);
  CHECK(split(iota({0}), 3).size() == 1);
  CHECK(split(iota({0}), 0).size() == 1);
  REQUIRE_THROWS_WITH(split(iota({4}), 0), Contains("[split] split_size 0"));
  REQUIRE_THROWS_WITH(split(iota({4}), -1), Contains("[split]"));

  auto v = split(iota({2, 6}), {1, 0, 5}, 1);
  REQUIRE(v.size() == 3);
  CHECK(v[1].numel() == 0);
  CHECK(naive_values(v[0]) == std::vector<double>{0, 6});
  CHECK(naive_values(v[2]) == std::vector<double>{1, 2, 3, 4, 5, 7, 8, 9, 10, 11});
  CHECK(v[2].storage().is_same(v[0].storage()));
  REQUIRE_THROWS_WITH(split(iota({2, 6}), {1, 4}, 1),
                      Contains("[split] split_sizes [1, 4] sum to 5 but dim 1 has size 6"));
  REQUIRE_THROWS_WITH(split(iota({2, 6}), {7, -1}, 1), Contains("[split]"));
}

TEST_CASE("shape_ops: pad against a naive reference", "[shape_ops]") {
  const int64_t lo0 = GENERATE(-2, 0, 1);
  const int64_t hi0 = GENERATE(-1, 0, 2);
  const int64_t lo1 = GENERATE(-3, 0, 2);
  const int64_t hi1 = GENERATE(0, 1);
  const DType dt = GENERATE(kFloat32, kInt64);
  Tensor x = iota({4, 5}, dt).transpose(0, 1);  // (5, 4), non-contiguous
  Tensor p = pad(x, {lo1, hi1, lo0, hi0}, Scalar(-1));
  REQUIRE(p.sizes() == Shape{5 + lo0 + hi0, 4 + lo1 + hi1});
  for (int64_t i = 0; i < p.size(0); ++i) {
    for (int64_t j = 0; j < p.size(1); ++j) {
      const int64_t si = i - lo0;
      const int64_t sj = j - lo1;
      const bool inside = si >= 0 && si < 5 && sj >= 0 && sj < 4;
      const double expect = inside ? x.at<double>({si, sj}) : -1.0;
      REQUIRE(p.at<double>({i, j}) == expect);
    }
  }
}

TEST_CASE("shape_ops: pad edge cases", "[shape_ops]") {
  Tensor x = iota({3});
  CHECK(naive_values(pad(x, {1, 2})) == std::vector<double>{0, 0, 1, 2, 0, 0});
  CHECK(naive_values(pad(x, {-1, -1})) == std::vector<double>{1});
  CHECK(pad(x, {-2, -1}).numel() == 0);
  CHECK(naive_values(pad(x, {-3, 2}, Scalar(5))) == std::vector<double>{5, 5});
  CHECK(naive_values(pad(iota({0}), {1, 1}, Scalar(4))) == std::vector<double>{4, 4});
  CHECK(equal(pad(x, {}), x));
  CHECK(pad(iota({2, 0}), {1, 1}).sizes() == Shape{2, 2});
  CHECK(pad(iota({2, 3}), {0, 0, 1, 0}).sizes() == Shape{3, 3});
  CHECK(naive_values(pad(full({2}, 1.0, kBFloat16), {1, 0}, Scalar(0.5))) ==
        std::vector<double>{0.5, 1, 1});
  REQUIRE_THROWS_WITH(pad(x, {1}), Contains("[pad] pads [1] has odd length"));
  REQUIRE_THROWS_WITH(pad(x, {1, 1, 1, 1}), Contains("[pad]"));
  REQUIRE_THROWS_WITH(pad(x, {-2, -2}), Contains("[pad] pads (-2, -2) on dim 0 of size 3"));
}
