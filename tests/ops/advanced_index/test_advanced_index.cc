// Advanced indexing on local tensors (index, index_put, index_put_) against a reference written
// from PyTorch's definition (element by element, in double): every dtype, adjacent and separated
// indexed dims, broadcasting index tensors, negative and int32 indices, empty indices, strided
// self, repeated positions (the last write wins / sums), and the errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/ops/advanced_index/advanced_index.h"
#include "dtensor/tensor/creation.h"
#include "tests/ops/common/ew_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Shape;
using dt::Tensor;
using namespace dtensor::ewtest;

namespace {

using Indices = std::vector<std::optional<Tensor>>;

Tensor ints(const std::vector<double>& v, dt::IntSpan shape, DType dtype = DType::kInt64) {
  return make(v, shape, dtype);
}

// The reference: the result shape and, for each result element in row-major order, the linear
// position in self it reads (written independently of the library's plan).
struct Ref {
  Shape out;
  std::vector<int64_t> source;
};

Ref reference(dt::IntSpan self_shape, const Indices& indices) {
  const int64_t ndim = static_cast<int64_t>(self_shape.size());
  std::vector<int64_t> dims;
  std::vector<std::vector<double>> vals;
  std::vector<Shape> shapes;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (!indices[k]) continue;
    dims.push_back(static_cast<int64_t>(k));
    vals.push_back(indices[k]->to_vector<double>());
    shapes.emplace_back(indices[k]->sizes().begin(), indices[k]->sizes().end());
  }
  Shape b;
  for (const Shape& s : shapes) b = dt::broadcast_shapes(b, s, "reference");
  const bool adjacent = dims.back() - dims.front() == static_cast<int64_t>(dims.size()) - 1;
  std::vector<int64_t> rest;  // non-indexed dims in order
  for (int64_t d = 0; d < ndim; ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) rest.push_back(d);
  }
  const int64_t lead = adjacent ? dims.front() : 0;  // non-indexed dims before B in the result
  Ref r;
  for (int64_t i = 0; i < lead; ++i) r.out.push_back(self_shape[rest[i]]);
  r.out.insert(r.out.end(), b.begin(), b.end());
  for (size_t i = lead; i < rest.size(); ++i) r.out.push_back(self_shape[rest[i]]);
  const int64_t total = dt::shape_numel(r.out);
  const Shape strides = dt::contiguous_strides(self_shape);
  for (int64_t e = 0; e < total; ++e) {
    const std::vector<int64_t> c = unravel(e, r.out);
    int64_t at = 0;
    for (size_t i = 0; i < rest.size(); ++i) {
      const int64_t pos = static_cast<int64_t>(i) < lead ? static_cast<int64_t>(i)
                                                         : static_cast<int64_t>(i + b.size());
      at += c[pos] * strides[rest[i]];
    }
    int64_t bi = 0;  // linear position in B
    for (size_t a = 0; a < b.size(); ++a) bi = bi * b[a] + c[lead + a];
    for (size_t j = 0; j < dims.size(); ++j) {
      int64_t v = static_cast<int64_t>(vals[j][broadcast_source(bi, b, shapes[j])]);
      if (v < 0) v += self_shape[dims[j]];
      at += v * strides[dims[j]];
    }
    r.source.push_back(at);
  }
  return r;
}

std::vector<double> ref_index(const Tensor& x, const Indices& indices) {
  const Ref r = reference(x.sizes(), indices);
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> out;
  for (int64_t s : r.source) out.push_back(v[s]);
  return out;
}

std::vector<double> ref_index_put(const Tensor& x, const Indices& indices, const Tensor& values,
                                  bool accumulate) {
  const Ref r = reference(x.sizes(), indices);
  std::vector<double> out = x.to_vector<double>();
  const std::vector<double> v = values.to_vector<double>();
  for (size_t e = 0; e < r.source.size(); ++e) {
    const double val = v[broadcast_source(static_cast<int64_t>(e), r.out, values.sizes())];
    double& o = out[r.source[e]];
    if (!accumulate) {
      o = val;
    } else if (x.dtype() == DType::kBool) {
      o = (o != 0 || val != 0) ? 1 : 0;
    } else {
      o += val;
    }
  }
  return out;
}

struct Case {
  std::string name;
  Shape self;
  Indices indices;
  Shape values;  // a shape that broadcasts to the result
};

std::vector<Case> cases() {
  return {
      {"x[i] 1-d index", {5, 3}, {ints({4, -1, 0, 4, 2}, {5})}, {5, 3}},
      {"x[:, i] one dim, repeats and negatives",
       {3, 5},
       {std::nullopt, ints({-5, 4, 1, 1}, {4})},
       {1, 4}},
      {"x[i, j] adjacent at the front", {4, 5, 2}, {ints({3, -4}, {2}), ints({0, 4}, {2})}, {2, 2}},
      {"x[:, i, j] adjacent, broadcast [2, 1] x [3]",
       {2, 4, 5},
       {std::nullopt, ints({1, -1}, {2, 1}), ints({0, 2, -5}, {3})},
       {3}},
      {"x[i, :, j] separated: broadcast dims first",
       {4, 3, 5},
       {ints({0, 3, -2}, {3}), std::nullopt, ints({4}, {1})},
       {3, 3}},
      {"x[i, :, :, j] separated, 2-d indices",
       {3, 2, 2, 4},
       {ints({0, 2, 1, 0}, {2, 2}), std::nullopt, std::nullopt, ints({3, -1}, {1, 2})},
       {2, 2, 2, 2}},
      {"x[i] int32 index, 2-d", {4, 3}, {ints({3, 0, -1, 1, 1, 2}, {2, 3}, DType::kInt32)}, {3}},
      {"x[:, i] empty index", {3, 4}, {std::nullopt, ints({}, {0})}, {1}},
      {"x[i] with an empty non-indexed dim", {3, 0}, {ints({2, 0}, {2})}, {1}},
      {"x[:, :, i] last dim",
       {2, 3, 4},
       {std::nullopt, std::nullopt, ints({3, 3, 0}, {3})},
       {2, 3, 3}},
  };
}

const DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                         DType::kInt32,   DType::kInt64,   DType::kBool};

}  // namespace

TEST_CASE("index and index_put equal their definition for every dtype and layout",
          "[advanced_index]") {
  for (const Case& c : cases()) {
    for (DType dtype : kDTypes) {
      INFO(c.name << " " << dt::dtype_name(dtype));
      const int64_t n = dt::shape_numel(c.self);
      const Tensor x = make(random_values(n, DType::kInt64, 11, -5, 5), c.self, dtype);
      const Tensor got = dt::index(x, c.indices);
      const Ref r = reference(c.self, c.indices);
      check_values(got, r.out, dtype, ref_index(x, c.indices), 0, 0);
      // A strided self (transposed / sliced storage) reads the same.
      for (const auto& [layout, view] : layouts(x)) {
        INFO(layout);
        check_values(dt::index(view, c.indices), r.out, dtype, ref_index(x, c.indices), 0, 0);
      }
      const Tensor values =
          make(random_values(dt::shape_numel(c.values), DType::kInt64, 12, -5, 5), c.values, dtype);
      for (bool accumulate : {false, true}) {
        INFO("accumulate " << accumulate);
        check_values(dt::index_put(x, c.indices, values, accumulate), c.self, dtype,
                     ref_index_put(x, c.indices, values, accumulate), 0, 0);
      }
      Tensor y = x.clone();
      const Tensor& same = dt::index_put_(y, c.indices, values, true);
      CHECK(same.data_ptr() == y.data_ptr());
      check_values(y, c.self, dtype, ref_index_put(x, c.indices, values, true), 0, 0);
    }
  }
}

TEST_CASE("index_put with repeated positions: the last write wins, accumulate sums",
          "[advanced_index]") {
  const Tensor x = make({0, 0, 0, 0}, {4}, DType::kFloat32);
  const Indices idx = {ints({1, 3, 1, -3, 3}, {5})};
  const Tensor v = make({10, 20, 30, 40, 50}, {5}, DType::kFloat32);
  // Position 1 is named by entries 0, 2 and 3 (-3 wraps to 1): entry 3 is the last.
  check_values(dt::index_put(x, idx, v), {4}, DType::kFloat32, {0, 40, 0, 50}, 0, 0);
  check_values(dt::index_put(x, idx, v, true), {4}, DType::kFloat32, {0, 80, 0, 70}, 0, 0);
  // 16-bit accumulate rounds once: 2048 + 1 + 1 in float16 step by step would stay 2048.
  const Tensor h = make({2048, 0}, {2}, DType::kFloat16);
  const Tensor ones = make({1, 1}, {2}, DType::kFloat16);
  check_values(dt::index_put(h, {ints({0, 0}, {2})}, ones, true), {2}, DType::kFloat16, {2050, 0},
               0, 0);
  // Two index tensors, broadcast: x[i, j] = v with (i, j) pairs (0, 1), (0, 1), (1, 0).
  const Tensor m = dt::zeros({2, 2}, dt::TensorOptions(DType::kInt64));
  check_values(dt::index_put(m, {ints({0, 0, 1}, {3}), ints({1, 1, 0}, {3})}, ints({5, 6, 7}, {3})),
               {2, 2}, DType::kInt64, {0, 6, 7, 0}, 0, 0);
}

TEST_CASE("advanced indexing errors name the op, the argument and the expectation",
          "[advanced_index]") {
  const Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kFloat32);
  REQUIRE_THROWS_WITH(dt::index(x, {std::nullopt, ints({3}, {1})}),
                      Catch::Contains("[index] index 3 out of range for dim 1 of size 3 "
                                      "(indices[1])"));
  REQUIRE_THROWS_WITH(dt::index(x, {ints({-3}, {1})}),
                      Catch::Contains("[index] index -3 out of range for dim 0 of size 2"));
  REQUIRE_THROWS_WITH(dt::index_put(x, {std::nullopt, ints({-4}, {1})}, make({0}, {1}, x.dtype())),
                      Catch::Contains("[index_put] index -4 out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(dt::index(x, {make({1}, {1}, DType::kFloat32)}),
                      Catch::Contains("[index] argument indices[0] has dtype float32, expected "
                                      "int64 or int32"));
  REQUIRE_THROWS_WITH(dt::index(x, {std::nullopt, make({1, 0, 1}, {3}, DType::kBool)}),
                      Catch::Contains("[index] argument indices[1] has dtype bool") &&
                          Catch::Contains("boolean mask indexing is not supported"));
  REQUIRE_THROWS_WITH(dt::index(x, {std::nullopt, std::nullopt}),
                      Catch::Contains("[index] expected at least one index tensor"));
  REQUIRE_THROWS_WITH(dt::index(x, {ints({0}, {1}), ints({0}, {1}), ints({0}, {1})}),
                      Catch::Contains("[index] too many indices for a tensor of 2 dims (got 3)"));
  REQUIRE_THROWS_WITH(dt::index(x, {ints({0, 1}, {2}), ints({0, 1, 2}, {3})}),
                      Catch::Contains("[index] indices[1] of shape [3] cannot be broadcast"));
  REQUIRE_THROWS_WITH(dt::index_put(x, {ints({0, 1}, {2})}, make({1, 2}, {2}, x.dtype())),
                      Catch::Contains("[index_put] argument values has shape [2], expected a "
                                      "shape that broadcasts to the indexed shape [2, 3]"));
  REQUIRE_THROWS_WITH(dt::index_put(x, {ints({0}, {1})}, make({1, 2, 3}, {3}, DType::kFloat64)),
                      Catch::Contains("[index_put] argument values has dtype float64, expected "
                                      "self's dtype float32"));
  // Any out-of-range index on an empty dim.
  const Tensor e = dt::zeros({2, 0});
  REQUIRE_THROWS_WITH(dt::index(e, {std::nullopt, ints({0}, {1})}),
                      Catch::Contains("[index] index 0 out of range for dim 1 of size 0"));
}

TEST_CASE("index_put and index_put_ on a strided self with non-contiguous values and indices",
          "[advanced_index]") {
  // Every case and a few dtypes: self transposed / a step-2 slice, values a step-2 slice (or
  // transposed), and each index tensor a step-2 slice of a wider buffer.
  for (const Case& c : cases()) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kBool}) {
      INFO(c.name << " " << dt::dtype_name(dtype));
      const int64_t n = dt::shape_numel(c.self);
      const Tensor x = make(random_values(n, DType::kInt64, 21, -5, 5), c.self, dtype);
      const Tensor values =
          make(random_values(dt::shape_numel(c.values), DType::kInt64, 22, -5, 5), c.values, dtype);
      Indices strided_idx;
      for (const auto& t : c.indices) {
        if (!t || t->dim() == 0) {
          strided_idx.push_back(t);
          continue;
        }
        const Tensor s = layouts(*t).back().second;
        strided_idx.emplace_back(s);
      }
      const auto self_layouts = layouts(x);
      for (size_t k = 0; k < self_layouts.size(); ++k) {
        const auto& [self_layout, self_view] = self_layouts[k];
        for (const auto& [values_layout, values_view] : layouts(values)) {
          if (values_layout == "contiguous") continue;
          INFO("self " << self_layout << ", values " << values_layout);
          for (bool accumulate : {false, true}) {
            INFO("accumulate " << accumulate);
            const std::vector<double> want = ref_index_put(x, c.indices, values, accumulate);
            check_values(dt::index_put(self_view, strided_idx, values_view, accumulate), c.self,
                         dtype, want, 0, 0);
            // In place on a fresh copy of the same strided layout: written through its strides.
            Tensor y = layouts(x.clone())[k].second;  // (layouts returns x itself first)
            const void* ptr = y.data_ptr();
            const Tensor& same = dt::index_put_(y, strided_idx, values_view, accumulate);
            CHECK(same.data_ptr() == ptr);
            CHECK(y.strides() == self_view.strides());
            check_values(y, c.self, dtype, want, 0, 0);
          }
        }
      }
    }
  }
}

TEST_CASE("index_put accumulate on int32 / int64 wraps on overflow", "[advanced_index]") {
  // Sums past the type's range wrap two's-complement (as CUDA's atomicAdd), without signed UB.
  {
    const int64_t hi = std::numeric_limits<int64_t>::max(),
                  lo = std::numeric_limits<int64_t>::min();
    const Tensor x = dt::from_vector<int64_t>({hi, lo, 5}, {3});
    const Tensor v = dt::from_vector<int64_t>({1, -1, 2, hi}, {4});
    const Tensor out = dt::index_put(x, {ints({0, 1, 0, 2}, {4})}, v, true);
    CHECK(out.to_vector<int64_t>() == std::vector<int64_t>{lo + 2, hi, lo + 4});
  }
  {
    const int32_t hi = std::numeric_limits<int32_t>::max(),
                  lo = std::numeric_limits<int32_t>::min();
    const Tensor x = dt::from_vector<int32_t>({hi, lo}, {2});
    const Tensor v = dt::from_vector<int32_t>({hi, lo, 1}, {3});
    // x[0] += hi (-> -2), x[1] += lo (-> 0), x[0] += 1 (-> -1).
    const Tensor out = dt::index_put(x, {ints({0, 1, 0}, {3})}, v, true);
    CHECK(out.to_vector<int32_t>() == std::vector<int32_t>{-1, 0});
  }
}
