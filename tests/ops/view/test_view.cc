#include <catch2/catch.hpp>
#include <vector>

#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"

namespace dt = dtensor;
using dt::Tensor;
using dt::test::rand_tensor;

namespace {

// Element (i0, i1, ...) of x computed from its strides by hand.
double elem(const Tensor& x, std::vector<int64_t> idx) {
  return x.at<double>(idx);
}

bool same_storage(const Tensor& a, const Tensor& b) {
  return a.storage().is_same(b.storage());
}

}  // namespace

TEST_CASE("view wrappers are views that index like the reference") {
  const Tensor x = rand_tensor({2, 3, 4}, dt::kFloat32, 1);

  const Tensor tr = dt::transpose(x, 0, 2);
  REQUIRE(dt::shape_str(tr.sizes()) == "[4, 3, 2]");
  CHECK(same_storage(tr, x));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) CHECK(elem(tr, {k, j, i}) == elem(x, {i, j, k}));

  const Tensor p = dt::permute(x, {1, 2, 0});
  REQUIRE(dt::shape_str(p.sizes()) == "[3, 4, 2]");
  CHECK(elem(p, {2, 3, 1}) == elem(x, {1, 2, 3}));

  const Tensor v = dt::view(x, {6, 4});
  CHECK(same_storage(v, x));
  CHECK(v.to_vector<double>() == x.to_vector<double>());
  CHECK(dt::shape_str(dt::view(x, {-1, 2}).sizes()) == "[12, 2]");

  const Tensor r = dt::reshape(tr, {24});  // not viewable: copies, row-major order of tr
  CHECK(r.to_vector<double>() == tr.contiguous().to_vector<double>());

  const Tensor u = dt::unsqueeze(x, -1);
  CHECK(dt::shape_str(u.sizes()) == "[2, 3, 4, 1]");
  CHECK(dt::shape_str(dt::squeeze(u).sizes()) == "[2, 3, 4]");
  CHECK(dt::shape_str(dt::squeeze(u, 3).sizes()) == "[2, 3, 4]");
  CHECK(dt::shape_str(dt::squeeze(u, 0).sizes()) == "[2, 3, 4, 1]");
  CHECK(dt::shape_str(dt::flatten(x, 1).sizes()) == "[2, 12]");
  CHECK(dt::shape_str(dt::flatten(x).sizes()) == "[24]");

  const Tensor n = dt::narrow(x, 1, 1, 2);
  CHECK(same_storage(n, x));
  CHECK(elem(n, {1, 1, 2}) == elem(x, {1, 2, 2}));
  const Tensor s = dt::slice(x, 2, 1, 4, 2);  // columns 1, 3
  REQUIRE(dt::shape_str(s.sizes()) == "[2, 3, 2]");
  CHECK(elem(s, {0, 2, 1}) == elem(x, {0, 2, 3}));
  const Tensor sel = dt::select(x, 1, -1);
  CHECK(dt::shape_str(sel.sizes()) == "[2, 4]");
  CHECK(elem(sel, {1, 0}) == elem(x, {1, 2, 0}));

  const Tensor e = dt::expand(rand_tensor({3, 1}, dt::kFloat32, 2), {2, 3, 5});
  REQUIRE(dt::shape_str(e.sizes()) == "[2, 3, 5]");
  CHECK(e.stride(0) == 0);
  CHECK(e.stride(2) == 0);
}

TEST_CASE("t transposes 2-d tensors and leaves 0-d and 1-d alone") {
  const Tensor m = rand_tensor({2, 5}, dt::kFloat64, 3);
  const Tensor mt = dt::t(m);
  REQUIRE(dt::shape_str(mt.sizes()) == "[5, 2]");
  CHECK(elem(mt, {4, 1}) == elem(m, {1, 4}));
  CHECK(dt::shape_str(dt::t(rand_tensor({7}, dt::kFloat32, 4)).sizes()) == "[7]");
  CHECK(dt::t(dt::zeros({})).dim() == 0);
  CHECK(dt::shape_str(dt::t(dt::zeros({0, 3})).sizes()) == "[3, 0]");
  REQUIRE_THROWS_WITH(dt::t(dt::zeros({2, 3, 4})),
                      Catch::Contains("[t] expected a tensor with at most 2 dims, got 3-d"));
  REQUIRE_THROWS_AS(dt::t(dt::zeros({2, 3, 4})), dt::Error);
}

TEST_CASE("cat, stack, split and chunk are reachable through view.h, with uneven sizes") {
  const Tensor a = rand_tensor({2, 3}, dt::kFloat32, 5);
  const Tensor b = rand_tensor({1, 3}, dt::kFloat32, 6);
  const Tensor c = dt::cat({a, b, dt::zeros({0, 3})}, 0);
  REQUIRE(dt::shape_str(c.sizes()) == "[3, 3]");
  CHECK(elem(c, {2, 1}) == elem(b, {0, 1}));
  const Tensor st = dt::stack({a, a}, 1);
  CHECK(dt::shape_str(st.sizes()) == "[2, 2, 3]");
  const auto parts = dt::split(rand_tensor({7, 2}, dt::kFloat32, 7), 3, 0);
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].size(0) == 1);
  const auto ch = dt::chunk(rand_tensor({5}, dt::kFloat32, 8), 4, 0);  // sizes 2, 2, 1
  REQUIRE(ch.size() == 3);
  CHECK(ch[2].size(0) == 1);
}

TEST_CASE("view wrappers report errors from the underlying op") {
  const Tensor x = dt::zeros({2, 3});
  REQUIRE_THROWS_AS(dt::view(x, {4, 2}), dt::Error);
  REQUIRE_THROWS_AS(dt::view(dt::transpose(x, 0, 1), {6}), dt::Error);
  REQUIRE_THROWS_AS(dt::transpose(x, 0, 2), dt::Error);
  REQUIRE_THROWS_AS(dt::narrow(x, 1, 2, 2), dt::Error);
  REQUIRE_THROWS_WITH(dt::narrow(x, 3, 0, 1), Catch::Contains("["));
}
