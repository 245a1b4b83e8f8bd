// Reliability of the tensor layer: overflow-checked size arithmetic (shapes whose element count,
// bytes, strides or offsets do not fit int64 raise instead of wrapping), defined float ->
// integer conversions, scalars refused by fill_/full as PyTorch refuses them, and in-place
// writes into expanded (stride-0) memory refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"
#include "dtensor/tensor/tensor.h"

using namespace dtensor;
using Catch::Contains;

namespace {
constexpr int64_t k2e32 = int64_t{1} << 32;
constexpr int64_t k2e62 = int64_t{1} << 62;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
}  // namespace

TEST_CASE("size checks: element counts that overflow int64 raise, naming the shape",
          "[tensor][overflow]") {
  // Was numel 0 (2^64 wraps to 0) and then a heap overflow when filled.
  REQUIRE_THROWS_WITH(zeros({k2e32, k2e32}),
                      Contains("[zeros] shape [4294967296, 4294967296] has more elements than "
                               "int64 can count"));
  REQUIRE_THROWS_WITH(empty({3, k2e62}), Contains("[empty] shape [3, 4611686018427387904]"));
  REQUIRE_THROWS_WITH(full({k2e32, k2e32, 2}, 1.0f), Contains("[full]"));
  REQUIRE_THROWS_WITH(shape_numel({kMax, 2}), Contains("[numel] shape"));
  REQUIRE_THROWS_WITH(shape_numel({kMax, 2}, "rand"), Contains("[rand] shape"));
  // A zero size makes the count 0 however large the other sizes are.
  CHECK(shape_numel({k2e62, 0, k2e62}) == 0);
  CHECK(shape_numel({kMax}) == kMax);
  CHECK(zeros({0, k2e62}).numel() == 0);
}

TEST_CASE("size checks: byte counts that overflow int64 raise", "[tensor][overflow]") {
  // Was nbytes 0 (2^62 * 8 wraps to 0).
  REQUIRE_THROWS_WITH(zeros({k2e62}, TensorOptions(kFloat64)),
                      Contains("[zeros] shape [4611686018427387904] of 8-byte elements needs more "
                               "than 2^63 - 1 bytes"));
  REQUIRE_THROWS_WITH(empty({k2e62, 2}, TensorOptions(kInt32)), Contains("[empty]"));
  REQUIRE_THROWS_WITH(shape_nbytes({k2e62}, 4, "op"), Contains("[op]"));
  CHECK(shape_nbytes({k2e62}, 1, "op") == k2e62);
  // from_blob computes the bytes it covers the same way.
  float x = 0;
  REQUIRE_THROWS_WITH(from_blob(&x, {k2e62, 4}, kFloat32), Contains("[from_blob]"));
}

TEST_CASE("size checks: strides, offsets and views", "[tensor][overflow]") {
  REQUIRE_THROWS_WITH(contiguous_strides({2, k2e32, k2e32}), Contains("[contiguous_strides]"));
  CHECK(contiguous_strides({k2e32, k2e32}) == Shape{k2e32, 1});
  REQUIRE_THROWS_WITH(check_strides({2, 3}, {3, -1}, "from_local"),
                      Contains("[from_local] stride -1 at dim 1 is negative"));
  REQUIRE_THROWS_WITH(check_strides({3, 3}, {k2e62, k2e62}, "from_local"),
                      Contains("[from_local] shape [3, 3] with strides") &&
                          Contains("reaches past offset 2^63 - 1"));
  REQUIRE_THROWS_WITH(check_strides({3}, {1, 1}, "op"), Contains("[op] stride [1, 1] has 2"));
  check_strides({0, 5}, {kMax, 1}, "op");  // an empty dim never steps

  Tensor t = zeros({4, 4});
  // The Tensor constructor: negative strides, and sizes/strides that reach past int64.
  REQUIRE_THROWS_WITH(Tensor(t.storage(), kFloat32, {4}, {-1}, 3),
                      Contains("[Tensor] stride -1 at dim 0 is negative"));
  REQUIRE_THROWS_WITH(
      Tensor(t.storage(), kFloat32, {3, 3}, {k2e62, k2e62}, 0),
      Contains("[Tensor] shape [3, 3] with strides") && Contains("reaches past offset 2^63 - 1"));
  REQUIRE_THROWS_WITH(Tensor(t.storage(), kFloat32, {4}, {1}, 13),
                      Contains("[Tensor]") && Contains("reach past the storage's 64 bytes"));
  // expand to more elements than int64 counts (stride 0: no memory, but numel must exist).
  Tensor s = zeros({1});
  REQUIRE_THROWS_WITH(s.expand({k2e32, k2e32}), Contains("more elements than int64"));
  REQUIRE_THROWS_WITH(s.to(kFloat64).expand({k2e62, 2}), Contains("[Tensor]"));
  // Its bytes must be countable too (nbytes() of 2^62 float32 elements would wrap).
  REQUIRE_THROWS_WITH(s.expand({k2e62}), Contains("[Tensor]") && Contains("2^63 - 1 bytes"));
  const Tensor big = s.expand({int64_t{1} << 60});
  CHECK(big.nbytes() == size_t{1} << 62);
  // view/reshape with a -1 whose other sizes overflow, flatten of an empty tensor with huge dims.
  REQUIRE_THROWS_WITH(t.view({-1, k2e32, k2e32}), Contains("[view]") && Contains("overflows"));
  REQUIRE_THROWS_WITH(t.reshape({k2e32, k2e32}), Contains("[reshape]"));
  const Tensor empty_huge(t.storage(), kFloat32, {0, k2e32, k2e32}, {0, 0, 0}, 0);
  REQUIRE_THROWS_WITH(empty_huge.flatten(1, 2), Contains("[flatten]"));
  // Contiguous strides of such a shape do not fit either.
  REQUIRE_THROWS_WITH(zeros({0, k2e32, k2e32}), Contains("[contiguous_strides]"));
  // slice with a step far past the end: one element, no overflowing stride.
  const Tensor one = t.slice(0, 1, 4, kMax);
  CHECK(one.sizes() == Shape{1, 4});
  CHECK(t.slice(0, 0, 4, k2e62).numel() == 4);
}

TEST_CASE("size checks: cat, pad, split and arange", "[tensor][overflow]") {
  const Tensor huge = zeros({1}, TensorOptions(kBool)).expand({k2e62, 1});
  REQUIRE_THROWS_WITH(cat({huge, huge, huge}, 0), Contains("[cat]") && Contains("int64"));
  REQUIRE_THROWS_WITH(pad(zeros({2}), {kMax, 1}), Contains("[pad]") && Contains("overflow"));
  REQUIRE_THROWS_WITH(split(zeros({4}), {kMax, kMax}, 0), Contains("[split]"));
  REQUIRE_THROWS_WITH(arange(0.0, 1e30, 1.0), Contains("[arange]") && Contains("int64"));
}

TEST_CASE("size checks: chunk_bounds never overflows", "[tensor][overflow]") {
  static_assert(chunk_bounds(5, 4, 3).offset == 5 && chunk_bounds(5, 4, 3).size == 0);
  for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{1} << 40}) {
    for (int64_t i : {int64_t{0}, k / 2, k - 2}) {
      if (i < 0 || i + 1 >= k) continue;
      const ChunkBounds b = chunk_bounds(kMax, k, i);
      CHECK(b.offset >= 0);
      CHECK(b.size >= 0);
      CHECK(b.offset + b.size == chunk_bounds(kMax, k, i + 1).offset);  // contiguous
    }
    const ChunkBounds last = chunk_bounds(kMax, k, k - 1);
    CHECK(last.offset + last.size == kMax);  // the last chunk ends at n
  }
}

TEST_CASE("conversions: floating to integer is defined (saturating, NaN -> 0)",
          "[tensor][convert]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> v = {nan, inf, -inf, 3e9f, -3e9f, 2.9f, -2.9f, 2147483520.f};
  const Tensor f = from_vector(v, {8});
  const std::vector<int32_t> i32 = f.to(kInt32).to_vector<int32_t>();
  CHECK(i32 ==
        std::vector<int32_t>{0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 2, -2, 2147483520});
  const std::vector<int64_t> i64 = f.to(kInt64).to_vector<int64_t>();
  CHECK(i64[0] == 0);
  CHECK(i64[1] == INT64_MAX);
  CHECK(i64[2] == INT64_MIN);
  CHECK(i64[3] == 3000000000);
  // Through float16/bfloat16 and float64 the same rule holds.
  CHECK(f.to(kFloat16).to(kInt32).to_vector<int32_t>()[1] == INT32_MAX);
  CHECK(f.to(kFloat64).to(kInt64).to_vector<int64_t>()[0] == 0);
  CHECK(detail::convert<int64_t>(9.3e18) == INT64_MAX);
  CHECK(detail::convert<int64_t>(-9.3e18) == INT64_MIN);
  CHECK(Scalar(std::nan("")).to<int32_t>() == 0);
  CHECK(Scalar(1e300).to_int() == INT64_MAX);
}

TEST_CASE("fill_ and full refuse values the dtype cannot hold, as PyTorch does",
          "[tensor][convert]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // Was: full(nan) into int32 gave 0 silently.
  REQUIRE_THROWS_WITH(full({2}, nan, TensorOptions(kInt32)),
                      Contains("[full] value nan cannot be converted to type int32 without "
                               "overflow"));
  REQUIRE_THROWS_WITH(full({2}, inf, TensorOptions(kInt64)), Contains("type int64"));
  REQUIRE_THROWS_WITH(full({2}, 1e10, TensorOptions(kInt32)), Contains("[full] value 1e+10"));
  REQUIRE_THROWS_WITH(full({2}, int64_t{1} << 40, TensorOptions(kInt32)), Contains("int32"));
  REQUIRE_THROWS_WITH(full({2}, 1e5, TensorOptions(kFloat16)), Contains("float16"));
  REQUIRE_THROWS_WITH(full({2}, 1e300, TensorOptions(kFloat32)), Contains("float32"));
  Tensor t = zeros({3}, TensorOptions(kInt32));
  REQUIRE_THROWS_WITH(t.fill_(nan), Contains("[fill_] value nan"));
  CHECK(t.to_vector<int32_t>() == std::vector<int32_t>{0, 0, 0});
  // What does fit is accepted: NaN/inf into floating dtypes, anything into bool, the bounds.
  CHECK(std::isnan(full({1}, nan, TensorOptions(kFloat16)).item<float>()));
  CHECK(std::isinf(full({1}, inf, TensorOptions(kBFloat16)).item<float>()));
  CHECK(full({1}, nan, TensorOptions(kBool)).item<bool>());
  CHECK(full({1}, 2147483647.9, TensorOptions(kInt32)).item<int32_t>() == INT32_MAX);
  CHECK(full({1}, int64_t{INT32_MIN}, TensorOptions(kInt32)).item<int32_t>() == INT32_MIN);
  CHECK(full({1}, 65504.0, TensorOptions(kFloat16)).item<float>() == 65504.f);
}

TEST_CASE("in-place writes into expanded (stride-0) memory are refused", "[tensor][overlap]") {
  const std::string pytorch =
      "unsupported operation: more than one element of the written-to tensor refers to a single "
      "memory location";
  Tensor base = zeros({1, 3});
  Tensor e = base.expand({4, 3});
  REQUIRE_THROWS_WITH(e.fill_(1.0f), Contains("[fill_] " + pytorch) && Contains("clone()"));
  REQUIRE_THROWS_WITH(e.zero_(), Contains("[fill_]"));
  REQUIRE_THROWS_WITH(e.copy_(ones({4, 3})),
                      Contains("[copy_] " + pytorch) && Contains("strides [0, 1]"));
  CHECK(base.to_vector<float>() == std::vector<float>{0, 0, 0});  // untouched
  // Stride 0 on a size-1 dim aliases nothing; a clone is writable.
  Tensor one = zeros({1}).expand({1, 1});
  one.fill_(2.0f);
  Tensor c = e.clone();
  c.fill_(3.0f);
  CHECK(c.to_vector<float>() == std::vector<float>(12, 3.0f));
  check_no_internal_overlap(base, "op");
}
