// The shared op machinery: type promotion tables, the elementwise iterator's dim merging and
// broadcasting, and the reduction plan.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "ops/common/elementwise_iter.h"
#include "ops/common/op_checks.h"
#include "ops/common/reduce_iter.h"
#include "ops/common/type_promotion.h"
#include "tensor/creation.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;

namespace {

const DType kAll[] = {DType::kBool,    DType::kInt32,   DType::kInt64, DType::kFloat16,
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
  Tensor in = dt::arange(12, DType::kInt64).view({3, 4});              // broadcast over dim 0
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
  REQUIRE_THROWS_WITH(dt::detail::broadcast_pair("add", std::vector<int64_t>{2, 3},
                                                 std::vector<int64_t>{4}, "other"),
                      Catch::Equals("[add] cannot broadcast shapes [2, 3] and [4] (argument other)"));
  CHECK(dt::shape_str(dt::detail::broadcast_pair("add", std::vector<int64_t>{5, 1, 3},
                                                 std::vector<int64_t>{4, 1}, "other")) ==
        "[5, 4, 3]");
  CHECK(dt::shape_str(dt::detail::broadcast_pair("add", std::vector<int64_t>{},
                                                 std::vector<int64_t>{0}, "other")) == "[0]");
  REQUIRE_THROWS_WITH(dt::detail::cuda_kernels_not_built("gelu"),
                      Catch::Equals("[gelu] CUDA kernels for this op are not built yet"));
  REQUIRE_THROWS_WITH(dt::detail::check_defined("exp", Tensor(), "self"),
                      Catch::Contains("[exp] argument self is an undefined tensor"));
}
