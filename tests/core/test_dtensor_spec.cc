// The shard math (compute_local_shape_and_offset) and TensorMeta, without processes. Specs
// with a DeviceMesh are tested in the mpi suite (test_dtensor_mpi.cc).
#include <catch2/catch.hpp>
#include <vector>

#include "dtensor/core/dtensor_spec.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
using Catch::Contains;

namespace {

using Ints = std::vector<int64_t>;

// Naive torch.chunk on an explicit index list: chunk i of `items` split into k pieces of
// ceil(len / k). Written independently of chunk_bounds.
std::vector<int64_t> naive_chunk(const std::vector<int64_t>& items, int64_t k, int64_t i) {
  const int64_t len = static_cast<int64_t>(items.size());
  int64_t size = 0;
  while (size * k < len) ++size;  // ceil(len / k)
  std::vector<int64_t> out;
  for (int64_t j = i * size; j < (i + 1) * size && j < len; ++j) out.push_back(items[j]);
  return out;
}

// Naive reference: the explicit global indices each tensor dim keeps at `coord`.
std::vector<std::vector<int64_t>> naive_indices(const Ints& shape, const Ints& mesh,
                                                const Ints& coord, const dt::Placements& p) {
  std::vector<std::vector<int64_t>> idx(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    for (int64_t j = 0; j < shape[d]; ++j) idx[d].push_back(j);
  }
  for (size_t m = 0; m < mesh.size(); ++m) {
    if (!p[m].is_shard()) continue;
    int64_t d = p[m].dim() < 0 ? p[m].dim() + static_cast<int64_t>(shape.size()) : p[m].dim();
    idx[d] = naive_chunk(idx[d], mesh[m], coord[m]);
  }
  return idx;
}

std::vector<Ints> all_coords(const Ints& mesh) {
  std::vector<Ints> out = {Ints()};
  for (int64_t n : mesh) {
    std::vector<Ints> next;
    for (const Ints& c : out) {
      for (int64_t k = 0; k < n; ++k) {
        Ints cc = c;
        cc.push_back(k);
        next.push_back(cc);
      }
    }
    out = next;
  }
  return out;
}

}  // namespace

TEST_CASE("shard math: the documented worked example", "[dtensor_spec]") {
  const Ints shape = {5, 4}, mesh = {2, 2}, coord = {1, 0};
  const dt::Placements p = {dt::Shard(0), dt::Shard(0)};
  const dt::LocalShard s = dt::compute_local_shape_and_offset(shape, mesh, coord, p);
  CHECK(s.shape == dt::Shape{1, 4});
  CHECK(s.offset == dt::Shape{3, 0});
}

TEST_CASE("shard math: torch.chunk uneven sizes and empty shards", "[dtensor_spec]") {
  // n = 5 over 4 ranks: 2, 2, 1, 0 (offsets 0, 2, 4, 5).
  const Ints expect_size = {2, 2, 1, 0};
  const Ints expect_off = {0, 2, 4, 5};
  for (int64_t r = 0; r < 4; ++r) {
    const dt::LocalShard s =
        dt::compute_local_shape_and_offset(Ints{5, 3}, Ints{4}, Ints{r}, {dt::Shard(0)});
    CHECK(s.shape == dt::Shape{expect_size[r], 3});
    CHECK(s.offset == dt::Shape{expect_off[r], 0});
  }
  // 3 over 4 ranks: chunk 1 -> 1, 1, 1, 0; and 2 over 4: 1, 1, 0, 0.
  CHECK(dt::compute_local_shape_and_offset(Ints{2}, Ints{4}, Ints{2}, {dt::Shard(0)}).shape ==
        dt::Shape{0});
  // Zero-size dim.
  const dt::LocalShard z =
      dt::compute_local_shape_and_offset(Ints{0, 3}, Ints{2}, Ints{1}, {dt::Shard(0)});
  CHECK(z.shape == dt::Shape{0, 3});
  CHECK(z.offset == dt::Shape{0, 0});
  // Negative shard dim.
  const dt::LocalShard n =
      dt::compute_local_shape_and_offset(Ints{4, 7}, Ints{2}, Ints{1}, {dt::Shard(-1)});
  CHECK(n.shape == dt::Shape{4, 3});
  CHECK(n.offset == dt::Shape{0, 4});
}

TEST_CASE("shard math matches a naive index-list reference", "[dtensor_spec]") {
  const std::vector<Ints> shapes = {{8, 6}, {5, 7}, {13, 3}, {0, 3}, {2, 7}, {1, 1}};
  const std::vector<Ints> meshes = {{4}, {3}, {2, 2}, {1, 4}, {4, 1}, {2, 3}, {2, 2, 2}};
  const std::vector<dt::Placement> choices = {dt::Replicate(), dt::Shard(0), dt::Shard(1),
                                              dt::Partial(), dt::Shard(-2)};
  int64_t checked = 0;
  for (const Ints& shape : shapes) {
    for (const Ints& mesh : meshes) {
      // Every placement list over `choices`.
      size_t combos = 1;
      for (size_t m = 0; m < mesh.size(); ++m) combos *= choices.size();
      for (size_t c = 0; c < combos; ++c) {
        dt::Placements p;
        size_t rest = c;
        for (size_t m = 0; m < mesh.size(); ++m) {
          p.push_back(choices[rest % choices.size()]);
          rest /= choices.size();
        }
        // Coverage: with only shard/replicate placements, blocks of coordinates that differ on
        // sharding mesh dims tile the tensor exactly once.
        for (const Ints& coord : all_coords(mesh)) {
          const dt::LocalShard s = dt::compute_local_shape_and_offset(shape, mesh, coord, p);
          const auto idx = naive_indices(shape, mesh, coord, p);
          for (size_t d = 0; d < shape.size(); ++d) {
            REQUIRE(s.shape[d] == static_cast<int64_t>(idx[d].size()));
            // Non-empty pieces are contiguous ranges starting at the offset.
            for (size_t j = 0; j < idx[d].size(); ++j) {
              REQUIRE(idx[d][j] == s.offset[d] + static_cast<int64_t>(j));
            }
            REQUIRE(s.offset[d] + s.shape[d] <= shape[d]);
          }
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 1000);
}

TEST_CASE("shard math: nested shards tile the tensor exactly once", "[dtensor_spec]") {
  for (const Ints& shape : {Ints{13, 5}, Ints{8, 9}, Ints{3, 2}}) {
    const Ints mesh = {2, 2, 2};
    const dt::Placements p = {dt::Shard(0), dt::Shard(1), dt::Shard(0)};
    std::vector<int> covered(shape[0] * shape[1], 0);
    for (const Ints& coord : all_coords(mesh)) {
      const dt::LocalShard s = dt::compute_local_shape_and_offset(shape, mesh, coord, p);
      for (int64_t i = 0; i < s.shape[0]; ++i) {
        for (int64_t j = 0; j < s.shape[1]; ++j) {
          ++covered[(s.offset[0] + i) * shape[1] + s.offset[1] + j];
        }
      }
    }
    for (int c : covered) REQUIRE(c == 1);
  }
  // Row blocks ordered by (coord0, coord1): [S(0), S(0)] on 2x2 over 8 rows.
  for (int64_t a = 0; a < 2; ++a) {
    for (int64_t b = 0; b < 2; ++b) {
      const dt::LocalShard s = dt::compute_local_shape_and_offset(
          Ints{8, 1}, Ints{2, 2}, Ints{a, b}, {dt::Shard(0), dt::Shard(0)});
      CHECK(s.offset[0] == 2 * (2 * a + b));
      CHECK(s.shape[0] == 2);
    }
  }
}

TEST_CASE("shard math: ranks outside the mesh get zero shapes", "[dtensor_spec]") {
  const dt::LocalShard s =
      dt::compute_local_shape_and_offset(Ints{4, 5}, Ints{2}, Ints{}, {dt::Shard(0)});
  CHECK(s.shape == dt::Shape{0, 0});
  CHECK(s.offset == dt::Shape{0, 0});
}

TEST_CASE("shard math errors", "[dtensor_spec]") {
  REQUIRE_THROWS_WITH(
      dt::compute_local_shape_and_offset(Ints{4, 5}, Ints{2}, Ints{0}, {dt::Shard(2)}),
      Contains("[compute_local_shape_and_offset]") && Contains("Shard dim 2") &&
          Contains("2-d tensor"));
  REQUIRE_THROWS_AS(
      dt::compute_local_shape_and_offset(Ints{4, 5}, Ints{2}, Ints{0}, {dt::Shard(-3)}), dt::Error);
  REQUIRE_THROWS_WITH(
      dt::compute_local_shape_and_offset(Ints{4, 5}, Ints{2, 2}, Ints{0, 0}, {dt::Shard(0)}),
      Contains("[compute_local_shape_and_offset]") && Contains("1 placements"));
  REQUIRE_THROWS_AS(dt::compute_local_shape_and_offset(Ints{}, Ints{2}, Ints{0}, {dt::Shard(0)}),
                    dt::Error);
}

TEST_CASE("TensorMeta", "[dtensor_spec]") {
  const dt::TensorMeta m(dt::Shape{2, 3, 4}, dt::kBFloat16);
  CHECK(m.stride == dt::Shape{12, 4, 1});
  CHECK(m.dtype == dt::kBFloat16);
  CHECK(m == dt::TensorMeta(dt::Shape{2, 3, 4}, dt::Shape{12, 4, 1}, dt::kBFloat16));
  CHECK_FALSE(m == dt::TensorMeta(dt::Shape{2, 3, 4}, dt::kFloat32));
  REQUIRE_THROWS_WITH(dt::TensorMeta(dt::Shape{2, 3}, dt::Shape{1}, dt::kFloat32),
                      Contains("[TensorMeta]"));
}
