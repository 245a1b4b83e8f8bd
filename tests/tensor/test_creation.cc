#include <catch2/catch.hpp>
#include <cstdint>

#include "dtensor/tensor/creation.h"
#include "test_util.h"

using namespace dtensor;
using namespace dtensor::test;
using Catch::Contains;

TEMPLATE_TEST_CASE("creation: empty, zeros, ones, full", "[creation]", float, double, Half,
                   BFloat16, int32_t, int64_t, bool) {
  const DType dt = dtype_of_v<TestType>;
  auto shape = GENERATE(Shape{}, Shape{0}, Shape{5}, Shape{3, 7}, Shape{2, 0, 4}, Shape{2, 3, 5});
  const int64_t n = shape_numel(shape);
  Tensor e = empty(shape, dt);
  CHECK(e.dtype() == dt);
  CHECK(e.sizes() == shape);
  CHECK(e.strides() == contiguous_strides(shape));
  CHECK(e.is_contiguous());
  CHECK(e.numel() == n);
  CHECK(e.storage().nbytes() == static_cast<size_t>(n) * sizeof(TestType));
  CHECK(reinterpret_cast<uintptr_t>(e.data_ptr()) % 64 == 0);
  CHECK(naive_values(zeros(shape, dt)) == std::vector<double>(n, 0.0));
  CHECK(naive_values(ones(shape, dt)) == std::vector<double>(n, 1.0));
  const double v = dt == kBool ? 1.0 : 3.0;
  CHECK(naive_values(full(shape, Scalar(3), dt)) == std::vector<double>(n, v));
  Tensor like = iota({4, 3}, dt).transpose(0, 1);
  Tensor el = empty_like(like);
  CHECK(el.sizes() == Shape{3, 4});
  CHECK(el.dtype() == dt);
  CHECK(el.is_contiguous());
  CHECK(naive_values(zeros_like(like)) == std::vector<double>(12, 0.0));
}

TEST_CASE("creation: negative sizes are rejected", "[creation]") {
  REQUIRE_THROWS_WITH(empty({2, -1}), Contains("[empty] shape [2, -1] has a negative size -1"));
  REQUIRE_THROWS_WITH(zeros({-3}), Contains("[zeros]"));
  REQUIRE_THROWS_WITH(full({-3}, 1.0), Contains("[full]"));
  REQUIRE_THROWS_WITH(from_vector<float>({}, {-1}), Contains("[from_vector]"));
}

TEST_CASE("creation: arange", "[creation]") {
  Tensor a = arange(5);
  CHECK(a.dtype() == kInt64);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(0).numel() == 0);
  CHECK(arange(-3).numel() == 0);
  CHECK(arange(5, kFloat32).dtype() == kFloat32);
  CHECK(arange(2, 11, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 5, 8});
  CHECK(arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
  CHECK(arange(0, 1, 0.25, kFloat64).to_vector<double>() ==
        std::vector<double>{0, 0.25, 0.5, 0.75});
  CHECK(arange(0, 1.1, 0.5, kFloat32).to_vector<float>() == std::vector<float>{0, 0.5f, 1.0f});
  CHECK(arange(3, 3, 1).numel() == 0);
  CHECK(arange(3, 1, 1).numel() == 0);
  CHECK(arange(0, 4, 1, kBFloat16).to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  REQUIRE_THROWS_WITH(arange(0, 4, 0), Contains("[arange] step 0"));
  REQUIRE_THROWS_WITH(arange(0, INFINITY, 1), Contains("[arange]"));
}

TEST_CASE("creation: from_vector for every element type", "[creation]") {
  CHECK(from_vector<float>({1.5f, 2.5f}, {2}).to_vector<float>() == std::vector<float>{1.5f, 2.5f});
  CHECK(from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).at<double>({1, 0}) == 4.0);
  CHECK(from_vector<Half>({Half(1.0f), Half(-2.0f)}, {2}).to_vector<float>() ==
        std::vector<float>{1.0f, -2.0f});
  CHECK(from_vector<BFloat16>({BFloat16(3.0f)}, {}).item<float>() == 3.0f);
  CHECK(from_vector<int32_t>({7, 8}, {2, 1}).dtype() == kInt32);
  CHECK(from_vector<int64_t>({}, {0, 4}).numel() == 0);
  Tensor b = from_vector<bool>({true, false, true}, {3});
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, true});
  REQUIRE_THROWS_WITH(from_vector<float>({1, 2, 3}, {2, 2}),
                      Contains("[from_vector] 3 values do not fill shape [2, 2]"));
}

TEST_CASE("creation: from_blob shares the caller's memory", "[creation]") {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  Tensor t = from_blob(buf, {2, 3}, kFloat32);
  CHECK(t.data_ptr() == buf);
  CHECK(t.at<float>({1, 2}) == 5.0f);
  t.fill_(Scalar(7));
  CHECK(buf[4] == 7.0f);
  CHECK(from_blob(nullptr, {0}, kInt32).numel() == 0);
  REQUIRE_THROWS_WITH(from_blob(nullptr, {2}, kInt32), Contains("[from_blob]"));
}
