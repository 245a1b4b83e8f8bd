// The shared op machinery: type promotion tables, the elementwise iterator's dim merging and
// broadcasting, dim ordering and tiling (results bit-identical to contiguous inputs), and the
// reduction plan.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <vector>

#include "dtensor/ops/common/detail/elementwise_iter.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/common/detail/reduce_iter.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;

namespace {

const DType kAll[] = {DType::kBool,     DType::kInt32,   DType::kInt64,  DType::kFloat16,
                      DType::kBFloat16, DType::kFloat32, DType::kFloat64};

}  // namespace

TEST_CASE("promote_types follows PyTorch's table", "[common]") {
  // Rows and columns in kAll's order; written out by hand from torch.promote_types.
  const DType b = DType::kBool, i32 = DType::kInt32, i64 = DType::kInt64, f16 = DType::kFloat16,
              bf = DType::kBFloat16, f32 = DType::kFloat32, f64 = DType::kFloat64;
  const DType table[7][7] = {
      /* bool */ {b, i32, i64, f16, bf, f32, f64},
      /* i32  */ {i32, i32, i64, f16, bf, f32, f64},
      /* i64  */ {i64, i64, i64, f16, bf, f32, f64},
      /* f16  */ {f16, f16, f16, f16, f32, f32, f64},
      /* bf16 */ {bf, bf, bf, f32, bf, f32, f64},
      /* f32  */ {f32, f32, f32, f32, f32, f32, f64},
      /* f64  */ {f64, f64, f64, f64, f64, f64, f64},
  };
  for (int i = 0; i < 7; ++i) {
    for (int j = 0; j < 7; ++j) {
      INFO(dt::dtype_name(kAll[i]) << " with " << dt::dtype_name(kAll[j]));
      CHECK(dt::promote_types(kAll[i], kAll[j]) == table[i][j]);
    }
  }
}

TEST_CASE("result_type with scalars and 0-d tensors", "[common]") {
  // Scalars only matter when of a higher category.
  CHECK(dt::result_type(DType::kInt32, dt::Scalar(2.5)) == DType::kFloat32);
  CHECK(dt::result_type(DType::kInt64, dt::Scalar(2.5)) == DType::kFloat32);
  CHECK(dt::result_type(DType::kBool, dt::Scalar(2.5)) == DType::kFloat32);
  CHECK(dt::result_type(DType::kBool, dt::Scalar(3)) == DType::kInt64);
  CHECK(dt::result_type(DType::kBool, dt::Scalar(true)) == DType::kBool);
  CHECK(dt::result_type(DType::kInt32, dt::Scalar(int64_t{1} << 40)) == DType::kInt32);
  CHECK(dt::result_type(DType::kFloat16, dt::Scalar(1e10)) == DType::kFloat16);
  CHECK(dt::result_type(DType::kBFloat16, dt::Scalar(7)) == DType::kBFloat16);
  CHECK(dt::result_type(DType::kFloat64, dt::Scalar(false)) == DType::kFloat64);
  // 0-d tensors: same-category ones do not widen, higher-category ones decide.
  const Tensor v_i32 = dt::zeros({3}, DType::kInt32);
  const Tensor v_f16 = dt::zeros({3}, DType::kFloat16);
  const Tensor s_f64 = dt::zeros({}, DType::kFloat64);
  const Tensor s_i64 = dt::zeros({}, DType::kInt64);
  CHECK(dt::result_type(v_i32, s_f64) == DType::kFloat64);
  CHECK(dt::result_type(s_f64, v_i32) == DType::kFloat64);
  CHECK(dt::result_type(v_f16, s_f64) == DType::kFloat16);
  CHECK(dt::result_type(v_i32, s_i64) == DType::kInt32);
  CHECK(dt::result_type(s_i64, s_f64) == DType::kFloat64);
  CHECK(dt::result_type(v_i32, v_f16) == DType::kFloat16);
  // Float-only math and can_cast.
  CHECK(dt::floating_result_type(DType::kInt64) == DType::kFloat32);
  CHECK(dt::floating_result_type(DType::kBool) == DType::kFloat32);
  CHECK(dt::floating_result_type(DType::kBFloat16) == DType::kBFloat16);
  CHECK(dt::can_cast(DType::kInt64, DType::kFloat16));
  CHECK(dt::can_cast(DType::kFloat64, DType::kFloat16));
  CHECK_FALSE(dt::can_cast(DType::kFloat32, DType::kInt64));
  CHECK_FALSE(dt::can_cast(DType::kInt32, DType::kBool));
}

TEST_CASE("ElementwiseIter merges contiguous dims and broadcasts with stride 0", "[common]") {
  Tensor out = dt::empty({4, 5, 6});
  Tensor same = dt::zeros({4, 5, 6});
  {
    const dt::detail::ElementwiseIter it(out, {&same});
    CHECK(it.ndim() == 1);  // the fast path: one call over all elements
    int calls = 0;
    it.for_each([&](char* const*, const int64_t* s, int64_t n) {
      ++calls;
      CHECK(n == 120);
      CHECK(s[0] == 4);
      CHECK(s[1] == 4);
    });
    CHECK(calls == 1);
  }
  {
    Tensor row = dt::zeros({6}, DType::kFloat64);  // broadcast over the first two dims
    const dt::detail::ElementwiseIter it(out, {&row});
    CHECK(it.ndim() == 2);  // [20 (out stride 24 B, row stride 0), 6]
    int calls = 0;
    it.for_each([&](char* const* p, const int64_t* s, int64_t n) {
      CHECK(p[1] == static_cast<char*>(row.data_ptr()));
      CHECK(s[1] == 8);
      CHECK(n == 6);
      ++calls;
    });
    CHECK(calls == 20);
  }
  {
    Tensor col = dt::zeros({4, 5, 1});  // stride 0 innermost
    Tensor t = dt::zeros({6, 5, 4}).transpose(0, 2);
    const dt::detail::ElementwiseIter it(out, {&col, &t});
    int64_t total = 0;
    it.for_each([&](char* const*, const int64_t* s, int64_t n) {
      CHECK(s[1] == 0);
      CHECK(s[2] == 4 * 5 * 4);
      total += n;
    });
    CHECK(total == 120);
  }
  {
    Tensor zero = dt::empty({0, 3});
    Tensor in = dt::zeros({3});
    const dt::detail::ElementwiseIter it(zero, {&in});
    int calls = 0;
    it.for_each([&](char* const*, const int64_t*, int64_t) { ++calls; });
    CHECK(calls == 0);
  }
  {
    Tensor scalar_out = dt::empty({});
    Tensor scalar_in = dt::zeros({});
    const dt::detail::ElementwiseIter it(scalar_out, {&scalar_in});
    int64_t total = 0;
    it.for_each([&](char* const*, const int64_t*, int64_t n) { total += n; });
    CHECK(total == 1);
  }
}

TEST_CASE("ElementwiseIter visits every element once in any layout", "[common]") {
  // Output index -> input linear index, recorded through pointer arithmetic, for a permuted
  // output and a broadcast input, against the closed form.
  Tensor out = dt::empty({3, 4, 2}, DType::kInt64).permute({2, 0, 1});  // shape [2, 3, 4]
  Tensor in = dt::arange(12, DType::kInt64).view({3, 4});               // broadcast over dim 0
  const dt::detail::ElementwiseIter it(out, {&in});
  it.for_each([&](char* const* p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<int64_t*>(p[0] + i * s[0]) =
          *reinterpret_cast<const int64_t*>(p[1] + i * s[1]) * 10;
    }
  });
  for (int64_t a = 0; a < 2; ++a) {
    for (int64_t b = 0; b < 3; ++b) {
      for (int64_t c = 0; c < 4; ++c) {
        CHECK(out.at<int64_t>({a, b, c}) == (b * 4 + c) * 10);
      }
    }
  }
}

namespace {

// Visits of every output element (by byte offset from out's first element) over a for_each.
std::vector<int> visit_counts(const dt::detail::ElementwiseIter& it, const Tensor& out,
                              int64_t* max_row = nullptr) {
  std::vector<int> count(static_cast<size_t>(out.numel()), 0);
  const char* base = static_cast<const char*>(out.data_ptr());
  it.for_each([&](char* const* p, const int64_t* s, int64_t n) {
    if (max_row) *max_row = std::max(*max_row, n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t off = (p[0] + i * s[0] - base) / static_cast<int64_t>(out.itemsize());
      ++count[static_cast<size_t>(off)];
    }
  });
  return count;
}

}  // namespace

TEST_CASE("ElementwiseIter orders dims by the output's strides, then merges them", "[common]") {
  SECTION("a transposed output and a same-layout input become one contiguous run") {
    Tensor out = dt::empty({5, 7}).transpose(0, 1);  // shape [7, 5], strides [1, 7]
    Tensor in = dt::zeros({5, 7}).transpose(0, 1);
    const dt::detail::ElementwiseIter it(out, {&in});
    CHECK(it.ndim() == 1);
    CHECK_FALSE(it.tiled());
    int calls = 0;
    it.for_each([&](char* const*, const int64_t* s, int64_t n) {
      ++calls;
      CHECK(n == 35);
      CHECK(s[0] == 4);
      CHECK(s[1] == 4);
    });
    CHECK(calls == 1);
  }
  SECTION("a permuted 3-d output walks its memory order; a broadcast input follows") {
    Tensor out = dt::empty({3, 4, 2}).permute({2, 0, 1});  // shape [2, 3, 4], strides [1, 8, 2]
    Tensor in = dt::zeros({3, 4});                         // broadcast over dim 0
    const dt::detail::ElementwiseIter it(out, {&in});
    REQUIRE(it.ndim() == 2);  // [12 (out's dims 1, 2 merged), 2 (out's dim 0)]
    CHECK(it.sizes()[0] == 12);
    CHECK(it.sizes()[1] == 2);
    CHECK(it.strides(0)[1] == 4);
    CHECK(it.strides(1)[1] == 0);
    CHECK(it.strides(1)[0] == 4);
    const std::vector<int> count = visit_counts(it, out);
    CHECK(std::count(count.begin(), count.end(), 1) == 24);
  }
  SECTION("a contiguous output keeps row-major order whatever the inputs' layout") {
    Tensor out = dt::empty({6, 5});
    Tensor in = dt::zeros({5, 6}).transpose(0, 1);
    const dt::detail::ElementwiseIter it(out, {&in});
    REQUIRE(it.ndim() == 2);
    CHECK(it.strides(0)[1] == 4);
    CHECK(it.strides(1)[1] == 24);
    CHECK_FALSE(it.tiled());  // too small to tile
  }
}

TEST_CASE("ElementwiseIter tiles a transposed input and still visits every element once",
          "[common]") {
  // Uneven tile edges in both dims (r = 2 tiles + 6, c = 1 tile + 13), a 3-d case with an outer
  // dim, and an input transposed against a transposed output.
  struct Case {
    Tensor out, in;
  };
  const int64_t t = dt::detail::kIterTile, r = 2 * t + 6, c = t + 13;
  std::vector<Case> cases = {
      {dt::empty({r, c}), dt::zeros({c, r}).transpose(0, 1)},
      {dt::empty({3, r, c}), dt::zeros({3, c, r}).transpose(1, 2)},
      {dt::empty({c, r}).transpose(0, 1), dt::zeros({r, c})},
      {dt::empty({t + 1, t + 1}), dt::zeros({t + 1, t + 1}).transpose(0, 1)}};
  for (const Case& c : cases) {
    INFO("out " << dt::shape_str(c.out.sizes()));
    const dt::detail::ElementwiseIter it(c.out, {&c.in});
    CHECK(it.tiled());
    int64_t max_row = 0;
    const std::vector<int> count = visit_counts(it, c.out, &max_row);
    CHECK(std::count(count.begin(), count.end(), 1) == c.out.numel());
    CHECK(max_row <= t);
  }
  // Small or one-sided shapes are not tiled.
  Tensor tall = dt::empty({1000, t});
  Tensor tall_in = dt::zeros({t, 1000}).transpose(0, 1);
  CHECK_FALSE(dt::detail::ElementwiseIter(tall, {&tall_in}).tiled());
}

TEST_CASE("ElementwiseIter keeps row-major order when an input overlaps the output", "[common]") {
  // out = x, input = x^T: the order of the writes is visible, so it stays row-major (as before
  // reordering existed) and is neither reordered nor tiled.
  Tensor x = dt::zeros({100, 100});  // large enough to be tiled otherwise
  Tensor xt = x.transpose(0, 1);
  const dt::detail::ElementwiseIter it(x, {&xt});
  CHECK_FALSE(it.tiled());
  REQUIRE(it.ndim() == 2);
  CHECK(it.strides(0)[1] == 4);
  std::vector<const char*> rows;
  it.for_each([&](char* const* p, const int64_t*, int64_t n) {
    CHECK(n == 100);
    rows.push_back(p[0]);
  });
  REQUIRE(rows.size() == 100);
  for (size_t r = 1; r < rows.size(); ++r) CHECK(rows[r] - rows[r - 1] == 400);
  // A transposed output overlapping its (untransposed) base: memory order would differ from the
  // output's row-major order, which is kept.
  const dt::detail::ElementwiseIter it2(xt, {&x});
  REQUIRE(it2.ndim() == 2);
  CHECK(it2.strides(0)[1] == 400);
  // The same view as input (add_(x, x)) is free to reorder: one contiguous run.
  const dt::detail::ElementwiseIter it3(xt, {&xt});
  CHECK(it3.ndim() == 1);
}

TEST_CASE("elementwise ops on strided inputs equal the op on contiguous copies bit for bit",
          "[common]") {
  // Random-looking floats (not small integers) so that any difference in evaluation would show.
  auto data = [](dt::Shape shape, int salt) {
    const int64_t n = dt::shape_numel(shape);
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919 + salt) % 1013) / 97.f;
    return dt::from_vector<float>(v, shape);
  };
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
    const Tensor ca = a.contiguous(), cb = b.contiguous();
    return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
  };
  // Tiled (both dims above the tile side, uneven edges), untiled, size-1 and zero-size shapes.
  const int64_t t = dt::detail::kIterTile;
  for (const dt::Shape& shape : {dt::Shape{2 * t + 6, t + 13}, dt::Shape{33, 65}, dt::Shape{1, 100},
                                 dt::Shape{0, 40}, dt::Shape{40, 0}}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kInt32}) {
      INFO(dt::shape_str(shape) << " " << dt::dtype_name(dtype));
      const Tensor a = data({shape[1], shape[0]}, 1).to(dtype).transpose(0, 1);
      const Tensor b = data(shape, 2).to(dtype);
      const Tensor bt = data({shape[1], shape[0]}, 3).to(dtype).transpose(0, 1);
      const Tensor ac = a.contiguous(), btc = bt.contiguous();
      CHECK(same_bits(dt::add(a, b), dt::add(ac, b)));
      CHECK(same_bits(dt::mul(a, bt), dt::mul(ac, btc)));
      CHECK(same_bits(dt::where(dt::gt(a, b), a, bt), dt::where(dt::gt(ac, b), ac, btc)));
      if (dtype != DType::kInt32) CHECK(same_bits(dt::exp(a), dt::exp(ac)));
      // In place into a transposed self.
      Tensor self = data({shape[1], shape[0]}, 4).to(dtype).transpose(0, 1);
      const Tensor want = dt::sub(self.contiguous(), btc);
      dt::sub_(self, bt);
      CHECK(same_bits(self, want));
    }
  }
  // A 3-d permutation with broadcasting.
  const Tensor p = data({4, 5, 6}, 5).permute({2, 0, 1});  // shape [6, 4, 5]
  const Tensor row = data({5}, 6);
  CHECK(same_bits(dt::add(p, row), dt::add(p.contiguous(), row)));
}

TEST_CASE("reductions over any dim of a transposed input equal a naive sum", "[common]") {
  // Small integers: every summation order is exact, so the comparison is exact.
  const int64_t r = 37, c = 53;
  std::vector<float> v(r * c);
  for (int64_t i = 0; i < r * c; ++i) v[i] = static_cast<float>((i * 13) % 17 - 8);
  const Tensor a = dt::from_vector<float>(v, {r, c});  // a[i][j] = v[i * c + j]
  const Tensor at = a.transpose(0, 1);                 // shape [c, r]
  std::vector<float> sum0(r, 0.f), sum1(c, 0.f);       // at summed over dim 0 / dim 1
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      sum0[i] += v[i * c + j];
      sum1[j] += v[i * c + j];
    }
  }
  const int64_t d0[] = {0}, d1[] = {1};
  CHECK(dt::sum(at, d0).to_vector<float>() == sum0);
  CHECK(dt::sum(at, d1).to_vector<float>() == sum1);
  std::vector<float> mean1 = sum1;
  for (float& m : mean1) m = static_cast<float>(static_cast<double>(m) / r);
  CHECK(dt::mean(at, d1).to_vector<float>() == mean1);
  // amax over the non-innermost dim of the transposed input.
  std::vector<float> max1(c, -1e30f);
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) max1[j] = std::max(max1[j], v[i * c + j]);
  }
  CHECK(dt::amax(at, d1).to_vector<float>() == max1);
  // Zero-size transposed input: sums are zeros.
  const Tensor e = dt::zeros({0, 4}).transpose(0, 1);
  CHECK(dt::sum(e, d1).to_vector<float>() == std::vector<float>(4, 0.f));
}

TEST_CASE("make_reduce_plan shapes, merging and errors", "[common]") {
  Tensor x = dt::zeros({2, 3, 4, 5});
  {
    const auto p = dt::detail::make_reduce_plan(x, {2, 3}, false, "sum");
    CHECK(dt::shape_str(p.out_shape) == "[2, 3]");
    CHECK(p.red_numel == 20);
    CHECK(p.red_sizes.size() == 1);  // dims 2 and 3 are contiguous together
    CHECK(p.red_strides[0] == 1);
    CHECK(p.kept_sizes.size() == 1);  // so are dims 0 and 1
    CHECK(p.kept_strides[0] == 20);
  }
  {
    const auto p = dt::detail::make_reduce_plan(x, {-3, 0}, true, "sum");
    CHECK(dt::shape_str(p.out_shape) == "[1, 1, 4, 5]");
    CHECK(p.red_numel == 6);
    CHECK(p.out_numel == 20);
  }
  {
    const auto p = dt::detail::make_reduce_plan(x, {}, false, "sum");
    CHECK(p.out_shape.empty());
    CHECK(p.out_numel == 1);
    CHECK(p.red_numel == 120);
  }
  {
    const auto p = dt::detail::make_reduce_plan(dt::zeros({2, 0}), {1}, false, "amax");
    CHECK(p.red_numel == 0);
    CHECK(p.empty_dim == 1);
  }
  // Visiting order: row-major over the reduced dims, with the right offsets.
  {
    Tensor y = dt::zeros({3, 4}).transpose(0, 1);  // shape [4, 3], strides [1, 4]
    const auto p = dt::detail::make_reduce_plan(y, {0, 1}, false, "argmax");
    std::vector<int64_t> offsets;
    dt::detail::for_each_reduce_row(p, 0, [&](int64_t off, int64_t n, int64_t stride) {
      for (int64_t i = 0; i < n; ++i) offsets.push_back(off + i * stride);
    });
    std::vector<int64_t> expect;
    for (int64_t a = 0; a < 4; ++a) {
      for (int64_t b = 0; b < 3; ++b) expect.push_back(a * 1 + b * 4);
    }
    CHECK(offsets == expect);
  }
  REQUIRE_THROWS_WITH(dt::detail::make_reduce_plan(x, {1, 1}, false, "sum"),
                      Catch::Contains("[sum] dim 1 appears more than once"));
  REQUIRE_THROWS_WITH(dt::detail::make_reduce_plan(x, {4}, false, "mean"),
                      Catch::Contains("[mean]"));
}

TEST_CASE("op_checks messages", "[common]") {
  REQUIRE_THROWS_WITH(
      dt::detail::broadcast_pair("add", std::vector<int64_t>{2, 3}, std::vector<int64_t>{4},
                                 "other"),
      Catch::Equals("[add] cannot broadcast shapes [2, 3] and [4] (argument other)"));
  CHECK(dt::shape_str(dt::detail::broadcast_pair("add", std::vector<int64_t>{5, 1, 3},
                                                 std::vector<int64_t>{4, 1}, "other")) ==
        "[5, 4, 3]");
  CHECK(dt::shape_str(dt::detail::broadcast_pair("add", std::vector<int64_t>{},
                                                 std::vector<int64_t>{0}, "other")) == "[0]");
  REQUIRE_THROWS_WITH(dt::detail::check_defined("exp", Tensor(), "self"),
                      Catch::Contains("[exp] argument self is an undefined tensor"));
}
