#include <catch2/catch.hpp>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/tensor.h"
#include "test_util.h"

using namespace dtensor;
using namespace dtensor::test;
using Catch::Contains;

namespace {

// Row-major values of iota(shape) restricted / permuted by a naive index map.
double iota_at(IntSpan shape, IntSpan idx) {
  double v = 0;
  for (size_t d = 0; d < shape.size(); ++d) v = v * static_cast<double>(shape[d]) + idx[d];
  return v;
}

}  // namespace

TEST_CASE("views: narrow shares storage and selects the right elements", "[views]") {
  auto shape = GENERATE(Shape{7}, Shape{5, 3}, Shape{4, 0, 3}, Shape{3, 4, 5});
  Tensor x = iota(shape);
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t n = x.size(d);
    for (int64_t start = 0; start <= n; ++start) {
      for (int64_t len = 0; start + len <= n; ++len) {
        Tensor v = x.narrow(d, start, len);
        REQUIRE(v.storage().is_same(x.storage()));
        REQUIRE(v.size(d) == len);
        // Naive: walk every element of x and keep those in the window.
        std::vector<double> expect;
        std::vector<double> all = naive_values(x);
        Shape idx(x.dim(), 0);
        for (double val : all) {
          if (idx[d] >= start && idx[d] < start + len) expect.push_back(val);
          for (int64_t k = x.dim() - 1; k >= 0; --k) {
            if (++idx[k] < x.size(k)) break;
            idx[k] = 0;
          }
        }
        REQUIRE(naive_values(v) == expect);
      }
    }
  }
  Tensor m = iota({4, 5});
  CHECK(naive_values(m.narrow(-1, -2, 2)) == std::vector<double>{3, 4, 8, 9, 13, 14, 18, 19});
  REQUIRE_THROWS_WITH(m.narrow(2, 0, 1), Contains("[narrow] dim 2 out of range"));
  REQUIRE_THROWS_WITH(m.narrow(0, 3, 2), Contains("[narrow] length 2"));
  REQUIRE_THROWS_WITH(m.narrow(0, 5, 0), Contains("[narrow] start 5"));
  REQUIRE_THROWS_AS(m.narrow(0, 0, -1), Error);
  REQUIRE_THROWS_AS(full({}, 1.0).narrow(0, 0, 1), Error);
}

TEST_CASE("views: slice with steps and Python clamping", "[views]") {
  Tensor x = iota({10});
  CHECK(naive_values(x.slice(0, 1, 8, 3)) == std::vector<double>{1, 4, 7});
  CHECK(naive_values(x.slice(0, 0, 10, 4)) == std::vector<double>{0, 4, 8});
  CHECK(naive_values(x.slice(0, -3, 100)) == std::vector<double>{7, 8, 9});
  CHECK(naive_values(x.slice(0, -100, 2)) == std::vector<double>{0, 1});
  CHECK(x.slice(0, 6, 3).numel() == 0);
  CHECK(x.slice(0, 20, 30).numel() == 0);
  Tensor m = iota({4, 6});
  Tensor s = m.slice(1, 1, 6, 2).slice(0, 0, 4, 3);
  CHECK(s.sizes() == Shape{2, 3});
  CHECK(s.strides() == Shape{18, 2});
  CHECK(naive_values(s) == std::vector<double>{1, 3, 5, 19, 21, 23});
  REQUIRE_THROWS_WITH(x.slice(0, 0, 5, 0), Contains("[slice] step 0"));
  REQUIRE_THROWS_WITH(x.slice(1, 0, 5), Contains("[slice] dim 1"));
}

TEST_CASE("views: select", "[views]") {
  Tensor x = iota({3, 4, 2});
  Tensor s = x.select(1, 2);
  CHECK(s.sizes() == Shape{3, 2});
  CHECK(naive_values(s) == std::vector<double>{4, 5, 12, 13, 20, 21});
  CHECK(naive_values(x.select(-1, -1)) ==
        std::vector<double>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23});
  CHECK(iota({5}).select(0, 3).dim() == 0);
  CHECK(iota({5}).select(0, 3).item<float>() == 3.0f);
  REQUIRE_THROWS_WITH(x.select(0, 3), Contains("[select] index 3 out of range"));
  REQUIRE_THROWS_WITH(x.select(0, -4), Contains("[select]"));
  REQUIRE_THROWS_AS(iota({0, 2}).select(0, 0), Error);
}

TEST_CASE("views: transpose and permute", "[views]") {
  Tensor x = iota({2, 3, 4});
  Tensor t = x.transpose(0, 2);
  CHECK(t.sizes() == Shape{4, 3, 2});
  CHECK(t.strides() == Shape{1, 4, 12});
  CHECK(t.storage().is_same(x.storage()));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 2; ++k)
        REQUIRE(t.at<double>({i, j, k}) == iota_at({2, 3, 4}, {k, j, i}));
  CHECK(x.transpose(1, 1).strides() == x.strides());
  CHECK(x.transpose(-1, 0).sizes() == Shape{4, 3, 2});
  Tensor p = x.permute({1, 2, 0});
  CHECK(p.sizes() == Shape{3, 4, 2});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 2; ++k)
        REQUIRE(p.at<double>({i, j, k}) == iota_at({2, 3, 4}, {k, i, j}));
  CHECK(x.permute({-1, 0, 1}).sizes() == Shape{4, 2, 3});
  CHECK(full({}, 1.0).transpose(0, -1).dim() == 0);
  CHECK(full({}, 1.0).permute({}).dim() == 0);
  REQUIRE_THROWS_WITH(x.transpose(0, 3), Contains("[transpose] dim 3"));
  REQUIRE_THROWS_WITH(x.permute({0, 1}), Contains("[permute]"));
  REQUIRE_THROWS_WITH(x.permute({0, 1, 1}), Contains("[permute] dims [0, 1, 1] repeats dim 1"));
  REQUIRE_THROWS_WITH(x.permute({0, 1, 3}), Contains("[permute] dim 3"));
}

TEST_CASE("views: view regroups compatible strides and refuses the others", "[views]") {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({6, 4});
  CHECK(v.storage().is_same(x.storage()));
  CHECK(v.strides() == Shape{4, 1});
  CHECK(naive_values(v) == iota_values(24));
  CHECK(x.view({-1}).sizes() == Shape{24});
  CHECK(x.view({4, -1}).sizes() == Shape{4, 6});
  CHECK(x.view({1, 24, 1}).strides()[1] == 1);
  // A narrowed tensor: rows are contiguous chunks, so splitting the last dim works...
  Tensor n = iota({4, 6}).narrow(1, 0, 4);  // strides (6, 1)
  Tensor nv = n.view({4, 2, 2});
  CHECK(nv.strides() == Shape{6, 2, 1});
  CHECK(naive_values(nv) == naive_values(n));
  // ...but merging rows is impossible.
  REQUIRE_THROWS_AS(n.view({16}), Error);
  REQUIRE_THROWS_WITH(n.view({16}), Contains("[view]"));
  REQUIRE_THROWS_WITH(n.view({16}), Contains("incompatible strides"));
  // Transposed: merging the two dims is impossible, splitting one is fine.
  Tensor t = iota({4, 6}).transpose(0, 1);  // sizes (6, 4) strides (1, 6)
  REQUIRE_THROWS_WITH(t.view({24}), Contains("[view]"));
  Tensor tv = t.view({3, 2, 4});
  CHECK(tv.strides() == Shape{2, 1, 6});
  CHECK(naive_values(tv) == naive_values(t));
  // Expanded (stride 0) dims can be split too.
  Tensor e = iota({1, 3}).expand({4, 3});
  CHECK(e.view({2, 2, 3}).strides() == Shape{0, 0, 1});
  // 0-d and zero-size
  CHECK(full({}, 2.0).view({1, 1}).sizes() == Shape{1, 1});
  CHECK(full({}, 2.0).view({-1}).sizes() == Shape{1});
  CHECK(iota({1}).view({}).dim() == 0);
  CHECK(iota({0, 3}).view({3, 0, 5}).numel() == 0);
  CHECK(iota({0, 3}).transpose(0, 1).view({0}).numel() == 0);
  REQUIRE_THROWS_WITH(x.view({5, 5}), Contains("[view] shape [5, 5] is invalid"));
  REQUIRE_THROWS_WITH(x.view({-1, -1}), Contains("more than one -1"));
  REQUIRE_THROWS_WITH(x.view({-1, 5}), Contains("[view]"));
  REQUIRE_THROWS_WITH(iota({0, 3}).view({-1, 0}), Contains("[view]"));
  REQUIRE_THROWS_WITH(x.view({-2, -12}), Contains("negative size"));
}

TEST_CASE("views: reshape views when it can and copies otherwise", "[views]") {
  Tensor x = iota({3, 4});
  Tensor r = x.reshape({4, 3});
  CHECK(r.storage().is_same(x.storage()));
  Tensor t = x.transpose(0, 1);
  Tensor rt = t.reshape({-1});
  CHECK_FALSE(rt.storage().is_same(x.storage()));
  CHECK(rt.is_contiguous());
  CHECK(naive_values(rt) == std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  Tensor s = iota({6, 5}).slice(0, 0, 6, 2);  // (3, 5) with row stride 10
  CHECK(naive_values(s.reshape({15})) == naive_values(s));
  CHECK(naive_values(s.reshape({5, 3})) == naive_values(s));
  REQUIRE_THROWS_WITH(x.reshape({5}), Contains("[reshape]"));
}

TEST_CASE("views: unsqueeze, squeeze and flatten", "[views]") {
  Tensor x = iota({3, 4});
  CHECK(x.unsqueeze(0).sizes() == Shape{1, 3, 4});
  CHECK(x.unsqueeze(1).sizes() == Shape{3, 1, 4});
  CHECK(x.unsqueeze(2).sizes() == Shape{3, 4, 1});
  CHECK(x.unsqueeze(-1).sizes() == Shape{3, 4, 1});
  CHECK(x.unsqueeze(-3).sizes() == Shape{1, 3, 4});
  CHECK(naive_values(x.transpose(0, 1).unsqueeze(1)) == naive_values(x.transpose(0, 1)));
  CHECK(full({}, 1.0).unsqueeze(0).sizes() == Shape{1});
  REQUIRE_THROWS_WITH(x.unsqueeze(3), Contains("[unsqueeze] dim 3"));

  Tensor y = iota({1, 3, 1, 2});
  CHECK(y.squeeze().sizes() == Shape{3, 2});
  CHECK(y.squeeze(0).sizes() == Shape{3, 1, 2});
  CHECK(y.squeeze(-2).sizes() == Shape{1, 3, 2});
  CHECK(y.squeeze(1).sizes() == Shape{1, 3, 1, 2});  // not size 1: unchanged
  CHECK(iota({1, 1}).squeeze().dim() == 0);
  CHECK(full({}, 1.0).squeeze(0).dim() == 0);
  CHECK(naive_values(y.squeeze()) == iota_values(6));
  REQUIRE_THROWS_WITH(y.squeeze(4), Contains("[squeeze]"));

  Tensor z = iota({2, 3, 4});
  CHECK(z.flatten().sizes() == Shape{24});
  CHECK(z.flatten(1).sizes() == Shape{2, 12});
  CHECK(z.flatten(0, 1).sizes() == Shape{6, 4});
  CHECK(z.flatten(1, 1).sizes() == Shape{2, 3, 4});
  CHECK(full({}, 5.0).flatten().sizes() == Shape{1});
  CHECK(naive_values(z.transpose(0, 2).flatten()) == naive_values(z.transpose(0, 2)));
  CHECK(iota({2, 0, 3}).flatten().sizes() == Shape{0});
  REQUIRE_THROWS_WITH(z.flatten(2, 1), Contains("[flatten]"));
  REQUIRE_THROWS_WITH(z.flatten(0, 3), Contains("[flatten] dim 3"));
}

TEST_CASE("views: expand gives stride 0", "[views]") {
  Tensor x = iota({3, 1});
  Tensor e = x.expand({2, 3, 4});
  CHECK(e.sizes() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(e.storage().is_same(x.storage()));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) REQUIRE(e.at<double>({i, j, k}) == static_cast<double>(j));
  CHECK(x.expand({-1, 5}).sizes() == Shape{3, 5});
  CHECK(x.expand({3, 0}).numel() == 0);
  CHECK(x.expand({0, 3, 1}).numel() == 0);
  CHECK(full({}, 7.0).expand({2, 2}).strides() == Shape{0, 0});
  CHECK(naive_values(full({}, 7.0).expand({2, 2})) == std::vector<double>(4, 7.0));
  REQUIRE_THROWS_WITH(x.expand({4, 4}), Contains("[expand] cannot expand shape [3, 1] to [4, 4]"));
  REQUIRE_THROWS_WITH(x.expand({4}), Contains("[expand]"));
  REQUIRE_THROWS_WITH(x.expand({-1, 3, 1}), Contains("[expand]"));
}
