#include <catch2/catch.hpp>
#include <cmath>

#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/tensor.h"
#include "test_util.h"

using namespace dtensor;
using namespace dtensor::test;
using Catch::Contains;

TEST_CASE("tensor: constructor checks the geometry against the storage", "[tensor]") {
  Storage s = Storage::allocate(24 * 4, Device());
  Tensor t(s, kFloat32, {2, 3, 4}, {12, 4, 1});
  CHECK(t.defined());
  CHECK(t.dim() == 3);
  CHECK(t.numel() == 24);
  CHECK(t.nbytes() == 96);
  CHECK(t.itemsize() == 4);
  CHECK(t.sizes() == Shape{2, 3, 4});
  CHECK(t.shape() == Shape{2, 3, 4});
  CHECK(t.strides() == Shape{12, 4, 1});
  CHECK(t.size(-1) == 4);
  CHECK(t.size(0) == 2);
  CHECK(t.stride(-2) == 4);
  CHECK(t.storage_offset() == 0);
  CHECK(t.is_contiguous());
  CHECK(t.device() == Device());
  CHECK(t.data_ptr() == s.data());
  CHECK(t.storage().is_same(s));

  Tensor off(s, kFloat32, {5}, {2}, 14);  // last element 14 + 8 = 22 < 24
  CHECK(off.data_ptr() == static_cast<char*>(s.data()) + 14 * 4);
  CHECK_FALSE(off.is_contiguous());
  REQUIRE_THROWS_WITH(Tensor(s, kFloat32, {5}, {2}, 16), Contains("[Tensor]"));
  REQUIRE_THROWS_WITH(Tensor(s, kFloat64, {13}, {1}), Contains("bytes"));
  REQUIRE_THROWS_AS(Tensor(s, kFloat32, {2, 3}, {1}), Error);
  REQUIRE_THROWS_AS(Tensor(s, kFloat32, {-1}, {1}), Error);
  REQUIRE_THROWS_AS(Tensor(s, kFloat32, {2}, {1}, -1), Error);
  REQUIRE_THROWS_AS(Tensor(Storage(), kFloat32, {2}, {1}), Error);
  // Zero-size views fit any storage.
  CHECK(Tensor(s, kFloat32, {0, 1000}, {1000, 1}, 500).numel() == 0);
  REQUIRE_THROWS_WITH(t.size(3), Contains("[Tensor::size] dim 3 out of range"));
  REQUIRE_THROWS_WITH(t.stride(-4), Contains("[Tensor::stride]"));
}

TEST_CASE("tensor: undefined and 0-d tensors", "[tensor]") {
  Tensor u;
  CHECK_FALSE(u.defined());
  CHECK(u.data_ptr() == nullptr);
  REQUIRE_THROWS_AS(u.clone(), Error);
  REQUIRE_THROWS_AS(u.contiguous(), Error);
  REQUIRE_THROWS_AS(u.item<float>(), Error);

  Tensor s = full({}, 3.5);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.is_contiguous());
  CHECK(s.item<float>() == 3.5f);
  CHECK(s.item<int64_t>() == 3);
  CHECK(s.at<double>({}) == 3.5);
  CHECK(s.to_vector<double>() == std::vector<double>{3.5});
  REQUIRE_THROWS_WITH(s.size(0), Contains("[Tensor::size]"));
}

TEST_CASE("tensor: is_contiguous", "[tensor]") {
  Tensor x = iota({3, 4});
  CHECK(x.is_contiguous());
  CHECK_FALSE(x.transpose(0, 1).is_contiguous());
  CHECK(x.narrow(0, 1, 2).is_contiguous());
  CHECK_FALSE(x.narrow(1, 1, 2).is_contiguous());
  CHECK(x.narrow(1, 1, 1).narrow(0, 0, 1).is_contiguous());  // size-1 dims ignore strides
  CHECK(x.unsqueeze(1).is_contiguous());
  CHECK_FALSE(iota({1}).expand({5}).is_contiguous());
  CHECK(iota({1}).expand({1}).is_contiguous());
  CHECK(iota({0, 4}).transpose(0, 1).is_contiguous());  // empty tensors are contiguous
}

TEST_CASE("tensor: typed data() checks the dtype", "[tensor]") {
  Tensor x = zeros({4}, kInt32);
  CHECK(x.data<int32_t>() == x.data_ptr());
  REQUIRE_THROWS_AS(x.data<float>(), Error);
  REQUIRE_THROWS_WITH(x.data<int64_t>(),
                      Contains("[Tensor::data] requested int64 but the tensor is int32"));
}

TEST_CASE("tensor: at, item and to_vector", "[tensor]") {
  Tensor x = iota({3, 4}, kInt64);
  CHECK(x.at<int64_t>({1, 2}) == 6);
  CHECK(x.at<int64_t>({-1, -1}) == 11);
  CHECK(x.at<double>({2, 0}) == 8.0);
  Tensor t = x.transpose(0, 1);
  CHECK(t.at<int64_t>({1, 2}) == 9);
  CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(x.narrow(1, 3, 1).narrow(0, 2, 1).item<int32_t>() == 11);
  CHECK(x.to_vector<bool>()[0] == false);
  CHECK(x.to_vector<bool>()[1] == true);
  CHECK(x.to_vector<Half>()[5].bits == Half(5.0f).bits);
  CHECK(iota({0, 3}).to_vector<float>().empty());
  REQUIRE_THROWS_WITH(x.at<int64_t>({3, 0}), Contains("[Tensor::at] index 3 out of range"));
  REQUIRE_THROWS_WITH(x.at<int64_t>({0, -5}), Contains("[Tensor::at]"));
  REQUIRE_THROWS_WITH(x.at<int64_t>({0}), Contains("[Tensor::at]"));
  REQUIRE_THROWS_WITH(x.item<int64_t>(), Contains("[Tensor::item]"));
  REQUIRE_THROWS_WITH(iota({0}).item<float>(), Contains("[Tensor::item]"));
}

TEMPLATE_TEST_CASE("tensor: contiguous, clone and to(dtype) keep values", "[tensor]", float, double,
                   Half, BFloat16, int32_t, int64_t) {
  const DType dt = dtype_of_v<TestType>;
  auto shape = GENERATE(Shape{}, Shape{0}, Shape{7}, Shape{3, 5}, Shape{2, 0, 3}, Shape{4, 3, 2});
  Tensor x = iota(shape, dt);
  CHECK(x.dtype() == dt);
  CHECK(x.contiguous().storage().is_same(x.storage()));
  Tensor c = x.clone();
  CHECK_FALSE(c.storage().is_same(x.storage()));
  CHECK(c.is_contiguous());
  CHECK(naive_values(c) == iota_values(x.numel()));
  if (x.dim() >= 2 && x.numel() > 0) {
    Tensor t = x.transpose(0, -1);
    REQUIRE_FALSE(t.is_contiguous());
    Tensor tc = t.contiguous();
    CHECK(tc.is_contiguous());
    CHECK(tc.sizes() == t.sizes());
    CHECK(naive_values(tc) == naive_values(t));
    CHECK_FALSE(tc.storage().is_same(x.storage()));
  }
  for (DType to : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64}) {
    Tensor y = x.to(to);
    CHECK(y.dtype() == to);
    CHECK(naive_values(y) == iota_values(x.numel()));  // small integers are exact in all
  }
  CHECK(x.to(dt).storage().is_same(x.storage()));
  CHECK(x.to(Device()).storage().is_same(x.storage()));
  Tensor b = x.to(kBool);
  std::vector<double> expect_b;
  for (int64_t i = 0; i < x.numel(); ++i) expect_b.push_back(i != 0 ? 1.0 : 0.0);
  CHECK(naive_values(b) == expect_b);
}

TEMPLATE_TEST_CASE("tensor: fill_ and zero_ on contiguous and strided tensors", "[tensor]", float,
                   double, Half, BFloat16, int32_t, int64_t, bool) {
  const DType dt = dtype_of_v<TestType>;
  Tensor x = zeros({5, 6}, dt);
  Tensor v = x.slice(1, 1, 6, 2);  // columns 1, 3, 5
  v.fill_(Scalar(1));
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      REQUIRE(x.at<double>({i, j}) == (j % 2 == 1 ? 1.0 : 0.0));
    }
  }
  x.fill_(Scalar(true));
  CHECK(naive_values(x) == std::vector<double>(30, 1.0));
  x.transpose(0, 1).zero_();
  CHECK(naive_values(x) == std::vector<double>(30, 0.0));
  Tensor e = empty({0, 3}, dt);
  e.fill_(Scalar(2));  // no-op
  CHECK(e.numel() == 0);
}

TEST_CASE("tensor: fill_ converts the scalar like the dtype does", "[tensor]") {
  CHECK(full({2}, 2.75, kInt32).to_vector<int32_t>() == std::vector<int32_t>{2, 2});
  CHECK(full({1}, 0.1, kFloat16).item<Half>().bits == 0x2e66);
  CHECK(full({1}, 0.5, kBool).item<bool>());
  CHECK(full({1}, int64_t{1} << 40, kInt64).item<int64_t>() == (int64_t{1} << 40));
  CHECK(std::isnan(full({1}, NAN, kBFloat16).item<float>()));
}
