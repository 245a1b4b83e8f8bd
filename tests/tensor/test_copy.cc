#include <catch2/catch.hpp>
#include <cmath>

#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/copy_kernel.h"
#include "dtensor/tensor/tensor.h"
#include "test_util.h"

using namespace dtensor;
using namespace dtensor::test;
using Catch::Contains;

namespace {

const DType kAll[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool};

// Values exactly representable in every floating dtype; the expectation for a destination
// dtype is computed here from the rules (truncate for ints, nonzero for bool).
std::vector<double> sample_values(DType src) {
  if (src == kBool) return {0, 1, 1, 0, 1};
  if (!is_floating(src)) return {0, 1, -2, 3, 100, -7, 250};
  return {0, 1, -2, 3, 100, 0.5, -1.5, 2.75, -0.25};
}

double expected_value(double v, DType dst) {
  if (dst == kBool) return v != 0 ? 1 : 0;
  if (!is_floating(dst)) return std::trunc(v);
  return v;
}

}  // namespace

TEST_CASE("copy: every dtype pair converts by the rules", "[copy]") {
  for (DType s : kAll) {
    for (DType d : kAll) {
      const std::vector<double> vals = sample_values(s);
      Tensor src = from_vector(vals, {static_cast<int64_t>(vals.size())}).to(s);
      Tensor dst = empty({static_cast<int64_t>(vals.size())}, d);
      dst.copy_(src);
      std::vector<double> expect;
      for (double v : vals) expect.push_back(expected_value(v, d));
      INFO(dtype_name(s) << " -> " << dtype_name(d));
      REQUIRE(naive_values(dst) == expect);
      // Strided source and destination through the general loop.
      Tensor dst2 = zeros({2, static_cast<int64_t>(vals.size())}, d);
      dst2.select(0, 1).copy_(src.unsqueeze(1).expand({-1, 2}).select(1, 0));
      REQUIRE(naive_values(dst2.select(0, 1)) == expect);
      REQUIRE(naive_values(dst2.select(0, 0)) == std::vector<double>(vals.size(), 0.0));
    }
  }
}

TEST_CASE("copy: half and bfloat16 destinations round to nearest even", "[copy]") {
  Tensor src = from_vector<float>(
      {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11), 65520.0f, 0.1f}, {4});
  std::vector<Half> h = src.to(kFloat16).to_vector<Half>();
  CHECK(h[0].bits == 0x3c00);
  CHECK(h[1].bits == 0x3c02);
  CHECK(h[2].bits == 0x7c00);
  CHECK(h[3].bits == 0x2e66);
  Tensor d = from_vector<double>({1.0 + std::ldexp(1.0, -8), 3.0}, {2});
  std::vector<BFloat16> b = d.to(kBFloat16).to_vector<BFloat16>();
  CHECK(b[0].bits == 0x3f80);
  CHECK(b[1].bits == 0x4040);
  // float64 -> float16 goes through float: NaN stays NaN, bool from NaN is true.
  Tensor n = from_vector<double>({NAN, -INFINITY}, {2});
  CHECK(std::isnan(n.to(kFloat16).to_vector<float>()[0]));
  CHECK(n.to(kFloat16).to_vector<Half>()[1].bits == 0xfc00);
  CHECK(n.to(kBool).to_vector<bool>() == std::vector<bool>{true, true});
}

TEST_CASE("copy: non-contiguous sources and destinations of every shape", "[copy]") {
  auto shape = GENERATE(Shape{}, Shape{0}, Shape{1}, Shape{13}, Shape{4, 7}, Shape{3, 0, 5},
                        Shape{5, 1, 3}, Shape{2, 3, 4, 5});
  const DType dt = GENERATE(kFloat32, kFloat16, kInt64);
  Tensor x = iota(shape, dt);
  const std::vector<double> ref = naive_values(x);
  const int64_t nd = x.dim();
  // Reverse all dims: every stride is "wrong".
  Shape perm(nd);
  for (int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  Tensor xp = x.permute(perm);
  Tensor dst = empty(xp.sizes(), dt);
  dst.copy_(xp);
  CHECK(naive_values(dst) == naive_values(xp));
  // Copy into a transposed destination, then read back in x's order.
  Tensor dst2 = empty(xp.sizes(), kFloat64).permute(perm);
  dst2.copy_(x);
  CHECK(naive_values(dst2) == ref);
  // Step-sliced source (every other element along the last dim).
  if (nd >= 1) {
    Tensor big = iota(
        [&] {
          Shape s = shape;
          s.back() = s.back() * 2;
          return s;
        }(),
        dt);
    Tensor sl = big.slice(-1, 0, big.size(-1), 2);
    Tensor out = empty(sl.sizes(), dt);
    out.copy_(sl);
    CHECK(naive_values(out) == naive_values(sl));
  }
}

TEST_CASE("copy: src broadcasts to the destination", "[copy]") {
  Tensor row = from_vector<int32_t>({1, 2, 3}, {3});
  Tensor dst = zeros({2, 3}, kFloat64);
  dst.copy_(row);
  CHECK(naive_values(dst) == std::vector<double>{1, 2, 3, 1, 2, 3});
  Tensor col = from_vector<float>({5, 6}, {2, 1});
  dst.copy_(col);
  CHECK(naive_values(dst) == std::vector<double>{5, 5, 5, 6, 6, 6});
  dst.copy_(full({}, 9.0));
  CHECK(naive_values(dst) == std::vector<double>(6, 9.0));
  Tensor e = zeros({0, 3});
  e.copy_(row);  // broadcasting into an empty destination
  CHECK(e.numel() == 0);
  REQUIRE_THROWS_WITH(dst.copy_(from_vector<float>({1, 2}, {2})),
                      Contains("[copy_] src of shape [2] cannot be broadcast"));
  REQUIRE_THROWS_WITH(dst.copy_(zeros({1, 2, 3})), Contains("[copy_]"));
  REQUIRE_THROWS_WITH(dst.copy_(Tensor()), Contains("[copy_] src is undefined"));
  REQUIRE_THROWS_AS(Tensor().copy_(dst), Error);
}

TEST_CASE("copy: overlapping source and destination behave as if src were read first", "[copy]") {
  Tensor x = iota({6});
  x.narrow(0, 1, 5).copy_(x.narrow(0, 0, 5));
  CHECK(naive_values(x) == std::vector<double>{0, 0, 1, 2, 3, 4});
  Tensor y = iota({3, 3});
  y.copy_(y.transpose(0, 1));
  CHECK(naive_values(y) == std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8});
}

TEST_CASE("copy: plan merges dims contiguous in both tensors", "[copy]") {
  auto p = detail::make_copy_plan(Shape{2, 3, 4}, Shape{12, 4, 1}, Shape{12, 4, 1});
  CHECK(p.sizes == Shape{24});
  p = detail::make_copy_plan(Shape{2, 3, 4}, Shape{12, 4, 1}, Shape{24, 1, 3});
  CHECK(p.sizes == Shape{2, 3, 4});
  p = detail::make_copy_plan(Shape{2, 1, 4}, Shape{4, 4, 1}, Shape{0, 7, 1});
  CHECK(p.sizes == Shape{2, 4});
  CHECK(p.src_strides == Shape{0, 1});
  p = detail::make_copy_plan(Shape{}, Shape{}, Shape{});
  CHECK(p.sizes == Shape{1});
  // A large strided copy against the naive reader (exercises the odometer across many rows).
  Tensor big = iota({64, 33, 7}, kFloat64).permute({2, 0, 1});
  Tensor out = empty(big.sizes(), kFloat32);
  out.copy_(big);
  CHECK(naive_values(out) == naive_values(big));
}

TEST_CASE("copy: transposing copies (tiled path) with ragged tiles and batch dims", "[copy]") {
  const int64_t rows = GENERATE(8, 31, 45, 70);
  const int64_t cols = GENERATE(8, 33, 37);
  const DType to = GENERATE(kFloat32, kFloat64, kBFloat16);
  Tensor x = iota({3, rows, cols}, kFloat32);
  Tensor t = x.transpose(1, 2);  // src strides (rows*cols, 1, cols)
  Tensor out = empty(t.sizes(), to);
  out.copy_(t);
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t i = 0; i < cols; i += 3) {
      for (int64_t j = 0; j < rows; j += 2) {
        const double v = static_cast<double>((b * rows + j) * cols + i);
        const double expect =
            to == kBFloat16 ? static_cast<float>(BFloat16(static_cast<float>(v))) : v;
        REQUIRE(out.at<double>({b, i, j}) == expect);
      }
    }
  }
  // Full comparison against the naive reader (exact for float32 and float64 destinations).
  if (to != kBFloat16) CHECK(naive_values(out) == naive_values(t));
  // 2-d case, into a strided destination.
  Tensor y = iota({rows, cols});
  Tensor dst = zeros({cols, rows * 2}).slice(1, 0, rows * 2, 2);
  dst.copy_(y.transpose(0, 1));
  CHECK(naive_values(dst) == naive_values(y.transpose(0, 1)));
}
