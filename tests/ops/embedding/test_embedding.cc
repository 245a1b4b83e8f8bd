#include <catch2/catch.hpp>
#include <vector>

#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Tensor;
using dt::test::check_close;
using dt::test::rand_tensor;

namespace {

// Expected rows: weight row idx[i] - offset when inside the table, zeros otherwise.
std::vector<double> ref_embedding(const std::vector<int64_t>& idx, const Tensor& w,
                                  int64_t offset) {
  const auto wv = w.to_vector<double>();
  const int64_t rows = w.size(0), dim = w.size(1);
  std::vector<double> out;
  for (int64_t i : idx) {
    const int64_t r = i - offset;
    for (int64_t j = 0; j < dim; ++j) out.push_back(r >= 0 && r < rows ? wv[r * dim + j] : 0.0);
  }
  return out;
}

}  // namespace

TEST_CASE("embedding gathers rows for any index shape and dtype") {
  using S = std::vector<int64_t>;
  const S shape = GENERATE(S{5}, S{2, 3}, S{}, S{0}, S{2, 0, 3});
  for (DType id : {dt::kInt32, dt::kInt64}) {
    for (DType wd : {dt::kFloat32, dt::kFloat64, dt::kBFloat16, dt::kFloat16, dt::kInt64}) {
      INFO(dt::dtype_name(id) << " " << dt::dtype_name(wd) << " " << dt::shape_str(shape));
      const Tensor idx = rand_tensor(shape, id, 1, 0, 9.49);  // values 0..9
      const Tensor w = rand_tensor({10, 4}, wd, 2);
      const Tensor y = dt::embedding(idx, w);
      CHECK(y.dtype() == wd);
      S out_shape = shape;
      out_shape.push_back(4);
      check_close(y, out_shape, ref_embedding(idx.to_vector<int64_t>(), w, 0), 0.0, 0.0);
    }
  }
  // Non-contiguous weight and indices.
  const Tensor wt = rand_tensor({3, 10}, dt::kFloat32, 3).transpose(0, 1);  // [10, 3]
  const Tensor idx = dt::from_vector<int64_t>({9, 0, 4, 4, 1, 7}, {3, 2}).transpose(0, 1);
  check_close(dt::embedding(idx, wt), {2, 3, 3}, ref_embedding(idx.to_vector<int64_t>(), wt, 0),
              0.0, 0.0);
  // dim = 0 rows.
  check_close(dt::embedding(idx, dt::zeros({10, 0})), {2, 3, 0}, {}, 0.0);
}

TEST_CASE("embedding rejects out-of-range indices and bad arguments") {
  using Catch::Contains;
  const Tensor w = dt::zeros({10, 3});
  REQUIRE_THROWS_WITH(dt::embedding(dt::from_vector<int64_t>({1, 12}, {2}), w),
                      Contains("[embedding] index 12 out of range for a table of 10 rows"));
  REQUIRE_THROWS_WITH(dt::embedding(dt::from_vector<int32_t>({-1}, {1}), w),
                      Contains("[embedding] index -1 out of range for a table of 10 rows"));
  REQUIRE_THROWS_AS(dt::embedding(dt::from_vector<int64_t>({10}, {1}), w), dt::Error);
  REQUIRE_THROWS_WITH(dt::embedding(dt::zeros({2}), w),
                      Contains("[embedding] expected int32 or int64 indices, got float32"));
  REQUIRE_THROWS_WITH(dt::embedding(dt::zeros({2}, dt::kInt64), dt::zeros({10})),
                      Contains("[embedding] expected a 2-d weight [num, dim], got shape [10]"));
}

TEST_CASE("embedding_masked gives zeros outside the shard and sums to the full lookup") {
  const int64_t vocab = 11, dim = 3, shards = 4;  // uneven: shard rows 3, 3, 3, 2
  const Tensor w = rand_tensor({vocab, dim}, dt::kFloat32, 4);
  const Tensor idx = dt::from_vector<int64_t>({0, 10, 3, 5, 5, 8, 2, 9}, {2, 4});
  const auto full = ref_embedding(idx.to_vector<int64_t>(), w, 0);
  std::vector<double> sum(full.size(), 0.0);
  for (int64_t s = 0; s < shards; ++s) {
    const auto b = dt::chunk_bounds(vocab, shards, s);
    const Tensor shard = w.narrow(0, b.offset, b.size);
    const Tensor y = dt::embedding_masked(idx, shard, b.offset);
    const auto expect = ref_embedding(idx.to_vector<int64_t>(), shard, b.offset);
    check_close(y, {2, 4, dim}, expect, 0.0, 0.0);
    const auto yv = y.to_vector<double>();
    for (size_t i = 0; i < yv.size(); ++i) sum[i] += yv[i];
  }
  CHECK(sum == full);
  // Indices beyond every shard (even invalid ones) are zeros, not errors; empty shards work.
  const Tensor odd = dt::from_vector<int64_t>({-5, 100}, {2});
  check_close(dt::embedding_masked(odd, w.narrow(0, 0, 2), 0), {2, dim},
              std::vector<double>(2 * dim, 0.0), 0.0, 0.0);
  check_close(dt::embedding_masked(odd, dt::zeros({0, dim}), 11), {2, dim},
              std::vector<double>(2 * dim, 0.0), 0.0, 0.0);
}
