// The scan family on local tensors against plain loops written here: cumsum / cumprod along
// every dim of strided inputs (dtype rules, 0-d, empty dims), sort's order (stability, NaN
// placement, indices), topk / kthvalue against sort, the cumprod gradient with zeros against
// the O(n^2) definition, and the errors. (DTensor forms, every strategy row and the gradients
// on meshes: the strategy-validation, gradcheck and sharded-gradient suites, by registration.)
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/ops/common/detail/cumprod_backward.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/tensor/creation.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using namespace dtensor::ewtest;

namespace {

// Reference scan along dim of a contiguous row-major copy, in double (product or sum).
std::vector<double> reference_scan(const std::vector<double>& v, dt::IntSpan shape, int64_t dim,
                                   bool prod) {
  std::vector<double> out(v.size());
  int64_t inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[dim];
  const int64_t outer = n == 0 ? 0 : static_cast<int64_t>(v.size()) / (n * inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double acc = prod ? 1 : 0;
      for (int64_t k = 0; k < n; ++k) {
        const size_t at = static_cast<size_t>((o * n + k) * inner + i);
        acc = prod ? acc * v[at] : acc + v[at];
        out[at] = acc;
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("cumsum and cumprod along every dim of strided inputs", "[scan]") {
  const dt::Shape shape{3, 4, 5};
  for (DType dtype : {DType::kFloat64, DType::kFloat32, DType::kInt32, DType::kBool}) {
    const std::vector<double> v = random_values(60, dtype, 11, -2, 2);
    const DType out_dtype = dt::is_floating(dtype) ? dtype : DType::kInt64;
    for (const auto& [layout, x] : layouts(make(v, shape, dtype))) {
      for (int64_t dim = 0; dim < 3; ++dim) {
        INFO(dt::dtype_name(dtype) << " " << layout << " dim " << dim);
        const double rtol = dtype == DType::kFloat32 ? 1e-6 : 0;
        check_values(dt::cumsum(x, dim), shape, out_dtype, reference_scan(v, shape, dim, false),
                     rtol, rtol);
        check_values(dt::cumprod(x, dim - 3), shape, out_dtype, reference_scan(v, shape, dim, true),
                     rtol, rtol);
      }
    }
  }
  // 0-d and zero-size dims.
  const Tensor s = make({3}, {}, DType::kInt32);
  check_values(dt::cumsum(s, 0), {}, DType::kInt64, {3}, 0, 0);
  check_values(dt::cumprod(dt::zeros({2, 0}), 1), {2, 0}, DType::kFloat32, {}, 0, 0);
  check_values(dt::cumsum(dt::zeros({0, 3}), 0), {0, 3}, DType::kFloat32, {}, 0, 0);
  REQUIRE_THROWS_WITH(dt::cumsum(dt::zeros({2, 3}), 2),
                      Catch::Contains("[cumsum] dim 2 out of range"));
}

TEST_CASE("sort is stable, puts NaN above every number and returns the source indices", "[scan]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = make({3, nan, 1, 3, -inf, 1, nan, 0}, {8}, DType::kFloat32);
  dt::ValuesIndices a = dt::sort(x);
  check_values(a.values, {8}, DType::kFloat32, {-inf, 0, 1, 1, 3, 3, nan, nan}, 0, 0);
  check_values(a.indices, {8}, DType::kInt64, {4, 7, 2, 5, 0, 3, 1, 6}, 0, 0);
  dt::ValuesIndices d = dt::sort(x, 0, /*descending=*/true);
  check_values(d.values, {8}, DType::kFloat32, {nan, nan, 3, 3, 1, 1, 0, -inf}, 0, 0);
  check_values(d.indices, {8}, DType::kInt64, {1, 6, 0, 3, 2, 5, 7, 4}, 0, 0);
  check_values(dt::argsort(x, -1, true), {8}, DType::kInt64, {1, 6, 0, 3, 2, 5, 7, 4}, 0, 0);

  // Along dim 0 of a transposed input: every column sorted, values == x at the indices.
  const std::vector<double> v = random_values(24, DType::kInt64, 5, -3, 3);
  const Tensor m = make(v, {4, 6}, DType::kInt64).transpose(0, 1);  // [6, 4]
  const dt::ValuesIndices s = dt::sort(m, 0);
  const auto vals = s.values.to_vector<double>();
  const auto idx = s.indices.to_vector<double>();
  const auto src = m.contiguous().to_vector<double>();
  for (int64_t c = 0; c < 4; ++c) {
    for (int64_t r = 0; r < 6; ++r) {
      const auto i = static_cast<int64_t>(idx[r * 4 + c]);
      CHECK(vals[r * 4 + c] == src[i * 4 + c]);
      if (r > 0) {
        const auto prev = static_cast<int64_t>(idx[(r - 1) * 4 + c]);
        CHECK(vals[(r - 1) * 4 + c] <= vals[r * 4 + c]);
        if (vals[(r - 1) * 4 + c] == vals[r * 4 + c]) CHECK(prev < i);  // stable
      }
    }
  }
  // 0-d: itself at index 0.
  check_values(dt::sort(make({2}, {}, DType::kFloat64)).indices, {}, DType::kInt64, {0}, 0, 0);
}

TEST_CASE("topk and kthvalue select from sort", "[scan]") {
  const Tensor x = make({4, 1, 3, 1, 5, 9, 2, 6}, {2, 4}, DType::kFloat64);
  dt::ValuesIndices t = dt::topk(x, 2, 1);
  check_values(t.values, {2, 2}, DType::kFloat64, {4, 3, 9, 6}, 0, 0);
  check_values(t.indices, {2, 2}, DType::kInt64, {0, 2, 1, 3}, 0, 0);
  t = dt::topk(x, 3, 1, /*largest=*/false);
  check_values(t.values, {2, 3}, DType::kFloat64, {1, 1, 3, 2, 5, 6}, 0, 0);
  check_values(t.indices, {2, 3}, DType::kInt64, {1, 3, 2, 2, 0, 3}, 0, 0);
  check_values(dt::topk(x, 0, 0).values, {0, 4}, DType::kFloat64, {}, 0, 0);
  dt::ValuesIndices k = dt::kthvalue(x, 2, 1);
  check_values(k.values, {2}, DType::kFloat64, {1, 5}, 0, 0);
  check_values(k.indices, {2}, DType::kInt64, {3, 0}, 0, 0);
  k = dt::kthvalue(x, 1, 0, /*keepdim=*/true);
  check_values(k.values, {1, 4}, DType::kFloat64, {4, 1, 2, 1}, 0, 0);
  check_values(k.indices, {1, 4}, DType::kInt64, {0, 0, 1, 0}, 0, 0);
  REQUIRE_THROWS_WITH(dt::topk(x, 5, 1),
                      Catch::Contains("[topk] k 5 out of range for dim 1 of size 4"));
  REQUIRE_THROWS_WITH(dt::kthvalue(x, 0, 1),
                      Catch::Contains("[kthvalue] k 0 out of range for dim 1 of size 4"));
}

TEST_CASE("the cumprod gradient is exact where the input has zeros", "[scan]") {
  // grad_x[i] = sum over j >= i of g[j] * prod(x[k], k <= j, k != i), by the definition.
  for (const std::vector<double>& xv :
       {std::vector<double>{2, -1, 3, 0.5, 4}, std::vector<double>{2, 0, 3, 0.5, 4},
        std::vector<double>{0, 2, 0, 3, -1}, std::vector<double>{1.5, 2, -3, 0.25, 0}}) {
    const std::vector<double> gv{0.3, -1.2, 0.7, 2.0, -0.4};
    std::vector<double> expect(5, 0.0);
    for (int i = 0; i < 5; ++i) {
      for (int j = i; j < 5; ++j) {
        double p = gv[j];
        for (int k = 0; k <= j; ++k) p *= k == i ? 1.0 : xv[k];
        expect[i] += p;
      }
    }
    const Tensor x = make(xv, {1, 5}, DType::kFloat64), g = make(gv, {1, 5}, DType::kFloat64);
    check_values(dt::detail::cumprod_backward(g, x, 1), {1, 5}, DType::kFloat64, expect, 1e-12,
                 1e-12);
    // Along dim 0 of the transposed layout: the same numbers.
    check_values(dt::detail::cumprod_backward(g.transpose(0, 1), x.transpose(0, 1), 0), {5, 1},
                 DType::kFloat64, expect, 1e-12, 1e-12);
  }
}

// Found by the PyTorch parity sweep (tests/ops/parity, its finite-specials variant): a zero ends
// the products it is in even where the others overflowed (1e300 * -1e300), so finite inputs
// keep a finite gradient: [0, -0, 1e300, -1e300, 3] gave NaN at x[0] (PyTorch 2.15: 0.5). An
// overflow is kept only where the exact value overflows: for [1e300, 1e300, 0, 2] x[0] and x[1]
// get 9e299 (PyTorch: inf, from its own overflowed products). An inf next to a zero still gives
// NaN (0 * inf; SEMANTICS, PyTorch parity round 3).
TEST_CASE("the cumprod gradient survives overflowed partial products", "[scan]") {
  const double inf = std::numeric_limits<double>::infinity();
  const auto grad = [](const std::vector<double>& xv, const std::vector<double>& gv) {
    const int64_t n = static_cast<int64_t>(xv.size());
    return dt::detail::cumprod_backward(make(gv, {n}, DType::kFloat64),
                                        make(xv, {n}, DType::kFloat64), 0);
  };
  check_values(grad({0, -0.0, 1e300, -1e300, 3}, {0.5, 0.9, -0.7, 0.8, -0.2}), {5}, DType::kFloat64,
               {0.5, 0, 0, 0, 0}, 0, 0);
  check_values(grad({1e300, 1e300, 0, 2}, {0.5, 0.9, -0.7, 0.8}), {4}, DType::kFloat64,
               {9e299, 9e299, inf, 0}, 1e-15, 0);
  const std::vector<double> with_inf =
      grad({2, 0, inf, 3}, {0.5, 0.9, -0.7, 0.8}).to_vector<double>();
  CHECK(std::isnan(with_inf[0]));
}

TEST_CASE("prod over all elements and along a dim", "[scan]") {
  const dt::Shape shape{3, 4, 5};
  for (DType dtype : {DType::kFloat64, DType::kInt32}) {
    const std::vector<double> v = random_values(60, dtype, 21, -2, 2);
    const DType out_dtype = dtype == DType::kInt32 ? DType::kInt64 : dtype;
    for (const auto& [layout, x] : layouts(make(v, shape, dtype))) {
      for (int64_t dim = 0; dim < 3; ++dim) {
        INFO(dt::dtype_name(dtype) << " " << layout << " dim " << dim);
        // The reference product is the last element of the reference cumprod along dim.
        const std::vector<double> scan = reference_scan(v, shape, dim, true);
        dt::Shape kept = shape;
        kept[dim] = 1;
        std::vector<double> expect;
        for (int64_t i = 0; i < 60; ++i) {
          const auto idx = unravel(i, shape);
          if (idx[dim] == shape[dim] - 1) expect.push_back(scan[i]);
        }
        check_values(dt::prod(x, dim, /*keepdim=*/true), kept, out_dtype, expect, 1e-15, 0);
        dt::Shape dropped = shape;
        dropped.erase(dropped.begin() + dim);
        check_values(dt::prod(x, dim - 3), dropped, out_dtype, expect, 1e-15, 0);
      }
      double all = 1;
      for (double e : v) all *= e;
      check_values(dt::prod(x), {}, out_dtype, {all}, 1e-15, 0);
    }
  }
  // Zero elements: the identity; bool gives int64.
  check_values(dt::prod(dt::zeros({2, 0}), 1), {2}, DType::kFloat32, {1, 1}, 0, 0);
  check_values(dt::prod(dt::zeros({0})), {}, DType::kFloat32, {1}, 0, 0);
  check_values(dt::prod(make({1, 0, 1}, {3}, DType::kBool)), {}, DType::kInt64, {0}, 0, 0);
}

TEST_CASE("cummax and cummin: later ties take the index, NaN stays the extreme", "[scan]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = make({1, 3, 3, 2, nan, 5, nan, 0}, {8}, DType::kFloat64);
  dt::ValuesIndices m = dt::cummax(x, 0);
  check_values(m.values, {8}, DType::kFloat64, {1, 3, 3, 3, nan, nan, nan, nan}, 0, 0);
  check_values(m.indices, {8}, DType::kInt64, {0, 1, 2, 2, 4, 4, 6, 6}, 0, 0);
  m = dt::cummin(make({4, 2, 2, 5, 1}, {5}, DType::kInt32), -1);
  check_values(m.values, {5}, DType::kInt32, {4, 2, 2, 2, 1}, 0, 0);
  check_values(m.indices, {5}, DType::kInt64, {0, 1, 2, 2, 4}, 0, 0);
  // Along dim 0 of a transposed input equals along dim 1 of the original, transposed.
  const Tensor y = make(random_values(20, DType::kInt64, 9, -3, 3), {4, 5}, DType::kInt64);
  const dt::ValuesIndices a = dt::cummax(y.transpose(0, 1), 0), b = dt::cummax(y, 1);
  CHECK(a.values.contiguous().to_vector<double>() ==
        b.values.transpose(0, 1).contiguous().to_vector<double>());
  CHECK(a.indices.contiguous().to_vector<double>() ==
        b.indices.transpose(0, 1).contiguous().to_vector<double>());
}
