// DTensor under mpirun (1, 2, 4, 8 ranks): distribute_tensor / full_tensor round trips,
// from_local, specs on a real mesh, printing, errors. Every rank runs every case and the meshes
// depend only on the world size, so all ranks issue the same collectives. Checks inside loops
// use CHECK (not REQUIRE) so a failing rank keeps issuing the collectives its peers expect.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/detail/autograd_hooks.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/core/redistribute.h"
#include "tests/common/dtensor_test_util.h"

namespace dt = dtensor;
using Catch::Contains;
using dt::test::Ints;

namespace {

using namespace dt::test::placements;

// distribute_tensor's collectives as {all_gather, scatter, broadcast, total}.
std::array<int64_t, 4> distribute_counts(const dt::CommDebugMode& comm) {
  return {comm.count(dt::CollectiveKind::kAllGather), comm.count(dt::CollectiveKind::kScatter),
          comm.count(dt::CollectiveKind::kBroadcast), comm.total_count()};
}

using Counts = std::array<int64_t, 4>;

}  // namespace

TEST_CASE("distribute_tensor / full_tensor round trip on every placement list", "[dtensor]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  const std::vector<Ints> shapes = {{w * 3 + 1, 5}, {0, 3}, {2, 7, 3}, {8, 4}};
  const std::vector<dt::DType> dtypes = {dt::kFloat32, dt::kInt64, dt::kBFloat16};
  int64_t cases = 0;
  for (const Ints& mesh_shape : dt::test::meshes_for_world(w)) {
    const dt::DeviceMesh mesh = dt::test::make_mesh(mesh_shape);
    const std::vector<dt::Placement> choices =
        mesh_shape.size() == 1 ? std::vector<dt::Placement>{R, S0, S1, Psum, Pavg, Pmax, Pmin}
                               : std::vector<dt::Placement>{R, S0, S1, Psum};
    for (const dt::Placements& p : dt::test::all_placements(choices, mesh_shape.size())) {
      for (const Ints& shape : shapes) {
        for (dt::DType dtype : dtypes) {
          INFO(dt::test::describe(mesh_shape, shape, dtype)
               << " placements " << dt::placements_str(p));
          // Every rank passes different data; rank 0 (the default src_data_rank) wins.
          const dt::Tensor mine = dt::test::make_data(shape, dtype, me);
          const dt::Tensor x = dt::test::make_data(shape, dtype, 0);
          const dt::DTensor d = dt::distribute_tensor(mine, mesh, p);
          CHECK(d.shape() == dt::Shape(shape.begin(), shape.end()));
          CHECK(d.dtype() == dtype);
          CHECK(d.placements() == p);
          if (mesh.contains_me()) {
            CHECK(d.to_local().shape() == d.spec().local_shard().shape);
            if (!d.spec().has_partial()) {
              CHECK(dt::equal(d.to_local(), dt::test::expected_block(x, mesh, p)));
            }
          } else {
            CHECK(d.to_local().numel() == 0);
          }
          const dt::Tensor full = d.full_tensor();
          if (mesh.contains_me()) {
            CHECK(dt::equal(full, x));
          } else {
            CHECK(full.numel() == 0);
          }
          ++cases;
        }
      }
    }
  }
  CHECK(cases > 0);
}

TEST_CASE("distribute_tensor: src_data_rank semantics", "[dtensor]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const Ints shape = {w * 3 + 1, 5};
  const dt::Tensor mine = dt::test::make_data(shape, dt::kFloat32, me);
  SECTION("nullopt: every rank takes its chunk of its own tensor, no communication") {
    dt::CommDebugMode comm;
    const dt::DTensor d = dt::distribute_tensor(mine, mesh, {S0}, std::nullopt);
    CHECK(comm.total_count() == 0);
    CHECK(dt::equal(d.to_local(), dt::test::expected_block(mine, mesh, {S0})));
  }
  SECTION("the last rank as the source: one meta all_gather, then one scatter") {
    dt::CommDebugMode comm;
    const dt::DTensor d = dt::distribute_tensor(mine, mesh, {S1}, w - 1);
    const int64_t one = w > 1 ? 1 : 0;  // a mesh of one rank communicates nothing
    CHECK(distribute_counts(comm) == Counts{one, one, 0, 2 * one});
    // Each rank receives one padded chunk of the 5 columns: (3w + 1) rows x ceil(5 / w) floats.
    CHECK(comm.bytes(dt::CollectiveKind::kScatter) == one * (w * 3 + 1) * ((5 + w - 1) / w) * 4);
    const dt::Tensor src = dt::test::make_data(shape, dt::kFloat32, w - 1);
    CHECK(dt::equal(d.to_local(), dt::test::expected_block(src, mesh, {S1})));
    CHECK(dt::equal(d.full_tensor(), src));
  }
  SECTION("a 2-d mesh: one meta all_gather per mesh dim, one scatter per sharded mesh dim") {
    if (w >= 4) {
      const dt::DeviceMesh m2 = dt::test::make_mesh({2, w / 2});
      const dt::Tensor src = dt::test::make_data(shape, dt::kFloat32, w - 1);
      {
        dt::CommDebugMode comm;
        const dt::DTensor d = dt::distribute_tensor(mine, m2, {S0, S1}, w - 1);
        CHECK(distribute_counts(comm) == Counts{2, 2, 0, 4});
        CHECK(dt::equal(d.to_local(), dt::test::expected_block(src, m2, {S0, S1})));
      }
      {
        // Replicate and Partial mesh dims broadcast the current piece instead.
        dt::CommDebugMode comm;
        const dt::DTensor d = dt::distribute_tensor(mine, m2, {R, S0}, w - 1);
        CHECK(distribute_counts(comm) == Counts{2, 1, 1, 4});
        CHECK(dt::equal(d.to_local(), dt::test::expected_block(src, m2, {R, S0})));
      }
      {
        dt::CommDebugMode comm;
        const dt::DTensor d = dt::distribute_tensor(mine, m2, {Psum, R}, w - 1);
        CHECK(distribute_counts(comm) == Counts{2, 0, 2, 4});
        CHECK(dt::equal(d.full_tensor(), src));
      }
    }
  }
  SECTION("a 16 MiB S(0) tensor: each rank receives only its quarter/eighth, not the whole") {
    const dt::Tensor big = dt::zeros({4096, 1024});  // 16 MiB of float32
    dt::CommDebugMode comm;
    const dt::DTensor d = dt::distribute_tensor(big, mesh, {S0}, 0);
    const int64_t one = w > 1 ? 1 : 0;
    CHECK(distribute_counts(comm) == Counts{one, one, 0, 2 * one});
    CHECK(comm.bytes(dt::CollectiveKind::kScatter) == one * (int64_t{16} << 20) / w);
    CHECK(d.to_local().nbytes() == static_cast<size_t>((int64_t{16} << 20) / w));
    if (me == 0) {
      WARN("16 MiB S(0) distribute at " << w << " ranks, bytes per rank: " << comm.str());
    }
  }
}

TEST_CASE("distribute_tensor from any source rank: scatter path equals the source's blocks",
          "[dtensor]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  const dt::Placement Sm1 = dt::Shard(-1);
  const std::vector<Ints> shapes = {{w * 3 + 1, 5, 2}, {0, 3, 4}, {1, 2, 3}, {2, 7, w + 1}};
  const std::vector<dt::DType> all_dtypes = {
      dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16, dt::kInt32, dt::kInt64, dt::kBool};
  int64_t cases = 0;
  for (const Ints& mesh_shape : dt::test::meshes_for_world(w)) {
    const dt::DeviceMesh mesh = dt::test::make_mesh(mesh_shape);
    const std::vector<dt::Placement> choices =
        mesh_shape.size() == 3 ? std::vector<dt::Placement>{R, S0, Sm1}
                               : std::vector<dt::Placement>{R, S0, S1, Sm1, Psum};
    const std::vector<int>& ranks = mesh.ranks();
    // The first, a middle and the last rank of the mesh as the source.
    std::vector<int> sources = {ranks.front(), ranks[ranks.size() / 2], ranks.back()};
    sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
    for (const dt::Placements& p : dt::test::all_placements(choices, mesh_shape.size())) {
      int64_t shard_dims = 0;
      bool zeroed = false;  // Partial(sum) off coordinate 0: the local is all zeros
      for (size_t i = 0; i < p.size(); ++i) {
        shard_dims += p[i].is_shard() ? 1 : 0;
        if (p[i].is_partial() && mesh.contains_me() && mesh.get_coordinate()[i] != 0) {
          zeroed = true;
        }
      }
      const bool all_shard = shard_dims == static_cast<int64_t>(p.size());
      for (int src : sources) {
        for (const Ints& shape : shapes) {
          // Every dtype on the fully sharded lists' first shape, float32 elsewhere.
          const std::vector<dt::DType> dtypes = all_shard && shape == shapes.front()
                                                    ? all_dtypes
                                                    : std::vector<dt::DType>{dt::kFloat32};
          for (dt::DType dtype : dtypes) {
            INFO(dt::test::describe(mesh_shape, shape, dtype)
                 << " placements " << dt::placements_str(p) << " source " << src);
            const dt::Tensor mine = dt::test::make_data(shape, dtype, me);
            const dt::Tensor x = dt::test::make_data(shape, dtype, src);
            dt::CommDebugMode comm;
            const dt::DTensor d = dt::distribute_tensor(mine, mesh, p, src);
            if (!mesh.contains_me()) {
              CHECK(comm.total_count() == 0);
              CHECK(d.to_local().numel() == 0);
              continue;
            }
            // One meta all_gather per mesh dim, then a scatter (Shard) or broadcast (other) per
            // mesh dim, none on a mesh dim of one rank.
            int64_t dims = 0, scatters = 0;
            for (int64_t i = 0; i < mesh.ndim(); ++i) {
              if (mesh.size(i) == 1) continue;
              ++dims;
              scatters += p[i].is_shard() ? 1 : 0;
            }
            CHECK(distribute_counts(comm) == Counts{dims, scatters, dims - scatters, 2 * dims});
            // Bit-identical to taking the chunk of the source's tensor locally (the nullopt
            // path, which every rank runs here on its copy of the source's data).
            const dt::Tensor local_ref = dt::distribute_tensor(x, mesh, p, std::nullopt).to_local();
            CHECK(d.to_local().shape() == local_ref.shape());
            CHECK(d.to_local().is_contiguous());
            CHECK(dt::equal(d.to_local(), local_ref));
            const dt::Tensor block = dt::test::expected_block(x, mesh, p);
            CHECK(dt::equal(d.to_local(), zeroed ? dt::zeros_like(block) : block));
            ++cases;
          }
        }
      }
    }
  }
  CHECK(cases > 0);
}

TEST_CASE("distribute_tensor: a shape or dtype that differs across ranks raises on every rank",
          "[dtensor]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  for (const Ints& mesh_shape : dt::test::meshes_for_world(w)) {
    const dt::DeviceMesh mesh = dt::test::make_mesh(mesh_shape);
    if (!mesh.contains_me()) continue;
    const std::vector<int>& ranks = mesh.ranks();
    const int last = ranks.back();
    INFO("mesh " << mesh.str());
    dt::Placements placements(mesh_shape.size(), dt::Replicate());
    placements[0] = S0;
    // The same shape everywhere: no error (the 1-rank case included).
    CHECK_NOTHROW(dt::distribute_tensor(dt::test::make_data({w * 2 + 1, 3}, dt::kFloat32), mesh,
                                        placements, last));
    if (ranks.size() < 2) continue;
    // The mesh's last rank passes one more row; rank ranks[0] is the source.
    const Ints rows = {me == last ? w * 2 + 2 : w * 2 + 1, 3};
    REQUIRE_THROWS_WITH(
        dt::distribute_tensor(dt::test::make_data(rows, dt::kFloat32), mesh, placements, ranks[0]),
        Contains("[distribute_tensor]") && Contains("argument tensor") &&
            Contains("rank " + std::to_string(last) + " passed shape [" +
                     std::to_string(w * 2 + 2) + ", 3] float32") &&
            Contains("src_data_rank " + std::to_string(ranks[0]) + " passed [" +
                     std::to_string(w * 2 + 1) + ", 3] float32") &&
            Contains("mismatching ranks: " + std::to_string(last) + ")"));
    // Now the source (the last rank) is the odd one out: every other rank is reported; a
    // dtype difference is caught as well.
    const dt::DType dtype = me == last ? dt::kInt64 : dt::kFloat32;
    REQUIRE_THROWS_WITH(
        dt::distribute_tensor(dt::test::make_data({4, 3}, dtype), mesh, placements, last),
        Contains("[distribute_tensor]") &&
            Contains("rank " + std::to_string(ranks[0]) + " passed shape [4, 3] float32") &&
            Contains("src_data_rank " + std::to_string(last) + " passed [4, 3] int64"));
    // Without a source rank nothing is exchanged, so nothing is checked.
    dt::CommDebugMode comm;
    CHECK_NOTHROW(dt::distribute_tensor(dt::test::make_data(rows, dt::kFloat32), mesh, placements,
                                        std::nullopt));
    CHECK(comm.total_count() == 0);
  }
}

TEST_CASE("distribute_tensor: Partial keeps the value on coordinate 0 (sum) or everywhere",
          "[dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::Tensor x = dt::test::make_data({5, 3}, dt::kFloat32, 0);
  const dt::DTensor s = dt::distribute_tensor(x, mesh, {Psum});
  if (mesh.get_local_rank(0) == 0) {
    CHECK(dt::equal(s.to_local(), x));
  } else {
    CHECK(dt::equal(s.to_local(), dt::zeros({5, 3})));
  }
  for (const dt::Placement& p : {Pavg, Pmax, Pmin}) {
    CHECK(dt::equal(dt::distribute_tensor(x, mesh, {p}).to_local(), x));
  }
}

TEST_CASE("ranks outside the mesh hold empty shards and issue nothing", "[dtensor]") {
  const int w = dt::world_size();
  const int64_t half = w >= 2 ? w / 2 : 1;
  const dt::DeviceMesh mesh = dt::test::make_mesh({half});
  const dt::Tensor x = dt::test::make_data({7, 2}, dt::kInt64, 0);
  dt::CommDebugMode comm;
  const dt::DTensor d = dt::distribute_tensor(x, mesh, {S0});
  const dt::DTensor r = d.redistribute(mesh, {R});
  const dt::Tensor full = r.full_tensor();
  if (mesh.contains_me()) {
    CHECK(dt::equal(full, x));
    // distribute_tensor's meta check and the S(0) -> R redistribute (none over one rank).
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == (half > 1 ? 2 : 0));
  } else {
    CHECK(d.to_local().numel() == 0);
    CHECK(d.to_local().dim() == 2);
    CHECK(full.numel() == 0);
    CHECK(comm.total_count() == 0);
  }
  CHECK(d.shape() == dt::Shape{7, 2});
}

TEST_CASE("from_local: inference, explicit shapes and run_check", "[dtensor]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  SECTION("even shards infer the global shape") {
    const dt::Tensor local = dt::test::make_data({2, 3}, dt::kFloat32, me);
    const dt::DTensor d = dt::DTensor::from_local(local, mesh, {S0}, /*run_check=*/true);
    CHECK(d.shape() == dt::Shape{2 * w, 3});
    CHECK(d.size(-1) == 3);
    CHECK(d.dim() == 2);
    CHECK(d.numel() == 6 * w);
    CHECK(d.spec().meta().stride == dt::Shape{3, 1});
    CHECK(dt::equal(d.to_local(), local));
    // full_tensor concatenates every rank's block.
    const dt::Tensor full = d.full_tensor();
    for (int r = 0; r < w; ++r) {
      CHECK(dt::equal(full.narrow(0, 2 * r, 2), dt::test::make_data({2, 3}, dt::kFloat32, r)));
    }
    const dt::DTensor rep = dt::DTensor::from_local(local, mesh, {R});
    CHECK(rep.shape() == dt::Shape{2, 3});
  }
  SECTION("uneven shards with an explicit shape") {
    const Ints shape = {w * 3 + 1, 2};
    const dt::Tensor x = dt::test::make_data(shape, dt::kInt64, 0);
    const dt::Tensor local = dt::test::expected_block(x, mesh, {S0});
    const dt::DTensor d = dt::DTensor::from_local(local, mesh, {S0}, true, shape);
    CHECK(dt::equal(d.full_tensor(), x));
  }
  SECTION("run_check names the mismatching rank on every rank") {
    if (w >= 2) {
      const int64_t cols = me == w - 1 ? 5 : 4;
      const dt::Tensor local = dt::zeros({2, cols});
      const std::string expected =
          "[from_local] rank " + std::to_string(w - 1) +
          " holds a local shard of shape [2, 5] but placements [S(0)] on global shape [" +
          std::to_string(2 * w) + ", 4] imply [2, 4]";
      REQUIRE_THROWS_WITH(dt::DTensor::from_local(local, mesh, {S0}, true), expected);
      // Without run_check nothing is compared.
      CHECK_NOTHROW(dt::DTensor::from_local(local, mesh, {S0}, false));
      // A dtype mismatch is reported too.
      const dt::Tensor typed = me == 0 ? dt::zeros({2, 4}, dt::kInt64) : dt::zeros({2, 4});
      REQUIRE_THROWS_WITH(dt::DTensor::from_local(typed, mesh, {S0}, true),
                          Contains("[from_local]") && Contains("dtype"));
      // Several mismatching ranks are all named.
      if (w >= 4) {
        const dt::Tensor odd = dt::zeros({me % 2 == 1 ? 3 : 2, 4});
        REQUIRE_THROWS_WITH(
            dt::DTensor::from_local(odd, mesh, {S0}, true),
            Contains("[from_local] rank 1 holds") && Contains("mismatching ranks: 1, 3"));
      }
    }
    // A wrong explicit global shape is caught on every world size.
    REQUIRE_THROWS_WITH(
        dt::DTensor::from_local(dt::zeros({2, 4}), mesh, {S0}, true, dt::Shape{2 * w + 1, 4}),
        Contains("[from_local]") && Contains("imply"));
  }
  SECTION("run_check makes replicas equal: each Replicate dim takes its first member's data") {
    const dt::Tensor local = dt::test::make_data({2, 3}, dt::kFloat32, me);
    const dt::Tensor before = local.clone();
    const dt::DTensor d = dt::DTensor::from_local(local, mesh, {R}, /*run_check=*/true);
    CHECK(dt::equal(d.to_local(), dt::test::make_data({2, 3}, dt::kFloat32, 0)));
    CHECK(dt::equal(local, before));  // the caller's tensor is not written
    // Without run_check the replicas stay as given.
    CHECK(dt::equal(dt::DTensor::from_local(local, mesh, {R}, false).to_local(), local));
    if (w >= 4) {
      // 2-D mesh [2, w/2], [S(0), R]: the Replicate dim's first member is coordinate 0 on dim 1.
      const dt::DeviceMesh m2 = dt::test::make_mesh({2, w / 2});
      const dt::DTensor e = dt::DTensor::from_local(local, m2, {S0, R}, true);
      const int first = (me / (w / 2)) * (w / 2);
      CHECK(dt::equal(e.to_local(), dt::test::make_data({2, 3}, dt::kFloat32, first)));
    }
  }
  SECTION("run_check on a 2-d mesh gathers over both mesh dims") {
    if (w >= 4) {
      const dt::DeviceMesh m2 = dt::test::make_mesh({2, w / 2});
      const Ints shape = {5, w + 1};
      const dt::Tensor x = dt::test::make_data(shape, dt::kFloat32);
      const dt::Tensor good = dt::test::expected_block(x, m2, {S0, S1});
      const dt::DTensor d = dt::DTensor::from_local(good, m2, {S0, S1}, true, shape);
      CHECK(dt::equal(d.full_tensor(), x));
      // Only the last rank is wrong: one extra row.
      const dt::Tensor bad = me == w - 1 ? dt::zeros({good.size(0) + 1, good.size(1)}) : good;
      REQUIRE_THROWS_WITH(dt::DTensor::from_local(bad, m2, {S0, S1}, true, shape),
                          Contains("[from_local] rank " + std::to_string(w - 1) + " holds") &&
                              !Contains("mismatching ranks"));
    }
  }
  SECTION("argument errors") {
    REQUIRE_THROWS_WITH(dt::DTensor::from_local(dt::zeros({2, 4}), mesh, {S0, R}),
                        Contains("[from_local]") && Contains("2 placements"));
    REQUIRE_THROWS_WITH(dt::DTensor::from_local(dt::zeros({2, 4}), mesh, {dt::Shard(2)}),
                        Contains("[from_local]") && Contains("Shard dim 2"));
  }
}

TEST_CASE("DTensorSpec on a mesh", "[dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::TensorMeta meta(dt::Shape{w * 2 + 1, 6}, dt::kFloat32);
  const dt::DTensorSpec a(mesh, {dt::Shard(-1)}, meta);
  CHECK(a.placement(0) == S1);  // normalised
  const dt::DTensorSpec b(mesh, {S1}, meta);
  CHECK(a == b);
  CHECK(a.hash() == b.hash());
  const dt::DTensorSpec c(mesh, {S0}, meta);
  CHECK_FALSE(a == c);
  CHECK(a.hash() != c.hash());
  CHECK(a.numel() == (w * 2 + 1) * 6);
  CHECK(a.ndim() == 2);
  CHECK(a.dtype() == dt::kFloat32);
  CHECK_FALSE(a.is_replicated());
  CHECK(a.with_placements({R}).is_replicated());
  CHECK(a.with_placements({Psum}).has_partial());
  CHECK_FALSE(a.has_partial());
  CHECK(a.mesh_dims_sharding(1) == absl::InlinedVector<int64_t, 4>{0});
  CHECK(a.mesh_dims_sharding(-1) == absl::InlinedVector<int64_t, 4>{0});
  CHECK(a.mesh_dims_sharding(0).empty());
  CHECK(a.local_shard().shape == a.local_shard(mesh.get_coordinate()).shape);
  CHECK(a.str() == "DTensorSpec([S(1)], shape=[" + std::to_string(w * 2 + 1) +
                       ", 6], float32, mesh=[" + std::to_string(w) + "])");
  CHECK(a.with_meta(dt::TensorMeta(dt::Shape{3, 3}, dt::kInt64)).dtype() == dt::kInt64);
  REQUIRE_THROWS_WITH(dt::DTensorSpec(mesh, {S0, S0}, meta), Contains("[DTensorSpec]") &&
                                                                 Contains("2 placements") &&
                                                                 Contains("1-d mesh"));
  REQUIRE_THROWS_WITH(dt::DTensorSpec(mesh, {dt::Shard(2)}, meta, "my_op"),
                      Contains("[my_op]") && Contains("Shard dim 2") && Contains("2-d tensor"));
  REQUIRE_THROWS_AS(a.with_placements({dt::Shard(-3)}), dt::Error);
  if (w >= 4) {
    const dt::DeviceMesh m2 = dt::test::make_mesh({2, w / 2});
    const dt::DTensorSpec nested(m2, {S0, S0}, meta);
    CHECK(nested.mesh_dims_sharding(0) == absl::InlinedVector<int64_t, 4>{0, 1});
    CHECK_FALSE(nested == dt::DTensorSpec(mesh, {S0}, meta));
  }
}

TEST_CASE("plan cache hits for a repeated (src, dst) pair", "[dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::TensorMeta meta(dt::Shape{w * 4, 3}, dt::kFloat32);
  const dt::DTensorSpec src(mesh, {S0}, meta), dst(mesh, {R}, meta);
  dt::clear_redistribute_plan_cache();
  const std::shared_ptr<const dt::RedistributePlan> first = dt::plan_redistribute(src, dst);
  const std::shared_ptr<const dt::RedistributePlan> second = dt::plan_redistribute(src, dst);
  CHECK(first.get() == second.get());
  const dt::PlanCacheStats stats = dt::redistribute_plan_cache_stats();
  CHECK(stats.hits == 1);
  CHECK(stats.misses == 1);
  CHECK(stats.size == 1);
  CHECK(dt::redistribute_cost(src, src) == 0);
  CHECK(dt::redistribute_cost(src, dst) == Approx(first->cost));
  // P(max) -> P(sum) has no exact plan, except over one rank (a relabel there).
  CHECK(dt::redistribute_cost(src.with_placements({Pmax}), src.with_placements({Psum})) ==
        (src.mesh().size() > 1 ? std::numeric_limits<double>::infinity() : 0.0));
  // redistribute_cost hit the cache once; a DTensor redistribute goes through it too.
  const dt::DTensor d =
      dt::distribute_tensor(dt::test::make_data({w * 4, 3}, dt::kFloat32), mesh, {S0});
  (void)d.redistribute({R});
  CHECK(dt::redistribute_plan_cache_stats().hits == 3);
  dt::clear_redistribute_plan_cache();
  CHECK(dt::redistribute_plan_cache_stats().size == 0);
}

TEST_CASE("plan cache is bounded: filling it past the bound clears it and plans stay correct",
          "[dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  dt::clear_redistribute_plan_cache();
  auto spec = [&](int64_t rows, const dt::Placement& p) {
    return dt::DTensorSpec(mesh, {p}, dt::TensorMeta(dt::Shape{rows, 3}, dt::kFloat32));
  };
  // kPlanCacheCapacity distinct pairs fill it exactly; the next new pair clears it first.
  const int64_t cap = dt::kPlanCacheCapacity;
  std::shared_ptr<const dt::RedistributePlan> held = dt::plan_redistribute(spec(1, S0), spec(1, R));
  for (int64_t rows = 2; rows <= cap; ++rows) {
    (void)dt::plan_redistribute(spec(rows, S0), spec(rows, R));
  }
  dt::PlanCacheStats stats = dt::redistribute_plan_cache_stats();
  CHECK(stats.size == cap);
  CHECK(stats.misses == cap);
  CHECK(stats.evictions == 0);
  // A hit on a full cache does not clear it.
  (void)dt::plan_redistribute(spec(cap, S0), spec(cap, R));
  CHECK(dt::redistribute_plan_cache_stats().size == cap);
  CHECK(dt::redistribute_plan_cache_stats().hits == 1);
  // One more distinct pair: cleared, then holds just that pair.
  const dt::DTensorSpec extra_src = spec(cap + 1, S0), extra_dst = spec(cap + 1, Psum);
  const std::shared_ptr<const dt::RedistributePlan> extra =
      dt::plan_redistribute(extra_src, extra_dst);
  stats = dt::redistribute_plan_cache_stats();
  CHECK(stats.evictions == 1);
  CHECK(stats.size == 1);
  CHECK(stats.misses == cap + 1);
  // Plans from before the clear stay valid while held and equal a fresh plan.
  const Ints one_row = {1, 3}, mesh_shape = {w};
  const dt::CostModel model = dt::default_cost_model();
  CHECK(held->steps ==
        dt::plan_redistribute(one_row, dt::kFloat32, mesh_shape, {S0}, {R}, model).steps);
  const Ints extra_shape = {cap + 1, 3};
  CHECK(extra->steps ==
        dt::plan_redistribute(extra_shape, dt::kFloat32, mesh_shape, {S0}, {Psum}, model).steps);
  // A pair evicted by the clear is planned again, identically.
  const std::shared_ptr<const dt::RedistributePlan> again =
      dt::plan_redistribute(spec(1, S0), spec(1, R));
  CHECK(again.get() != held.get());
  CHECK(again->steps == held->steps);
  CHECK(dt::redistribute_plan_cache_stats().misses == cap + 2);
  // Redistributing after the clear still gives the right values.
  const dt::Tensor x = dt::test::make_data({w * 2 + 1, 3}, dt::kFloat32);
  const dt::DTensor d = dt::distribute_tensor(x, mesh, {S0});
  CHECK(dt::equal(d.redistribute({R}).to_local(), x));
  dt::clear_redistribute_plan_cache();
  CHECK(dt::redistribute_plan_cache_stats().evictions == 0);
}

TEST_CASE("DTensor accessors and printing", "[dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::DTensor d =
      dt::distribute_tensor(dt::test::make_data({w * 2, 16}, dt::kFloat32), mesh, {S0});
  CHECK(d.defined());
  CHECK_FALSE(dt::DTensor().defined());
  CHECK(dt::DTensor().str() == "DTensor()");
  CHECK(d.device() == dt::Device());
  CHECK(d.device_mesh() == mesh);
  CHECK(d.sizes() == d.shape());
  const std::string expected = "DTensor(local=[2, 16], global=[" + std::to_string(w * 2) +
                               ", 16], placements=[S(0)], float32, mesh=[" + std::to_string(w) +
                               "])";
  CHECK(d.str() == expected);
  std::ostringstream os;
  os << d;
  CHECK(os.str() == expected);
  REQUIRE_THROWS_AS(d.size(2), dt::Error);
}

TEST_CASE("visualize_sharding lists each block and its ranks on the first rank", "[dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::DTensor d =
      dt::distribute_tensor(dt::test::make_data({w * 2 + 1, 3}, dt::kFloat32), mesh, {S0});
  const std::string text = dt::visualize_sharding(d, /*print=*/false);
  if (mesh.get_local_rank(0) == 0) {
    CHECK(text.find("rows [0, 3)") != std::string::npos);
    CHECK(text.find("cols [0, 3)") != std::string::npos);
    CHECK(text.find("ranks 0") != std::string::npos);
    // The last rank is listed (alone or with other holders of an empty block).
    const std::string body = text.substr(text.find('\n'));
    if (w > 1) CHECK(body.find(std::to_string(w - 1)) != std::string::npos);
    if (w == 8) CHECK(body.find("ranks 6, 7 (empty)") != std::string::npos);
  } else {
    CHECK(text.empty());
  }
  const dt::DTensor r = dt::distribute_tensor(dt::test::make_data({4}, dt::kFloat32), mesh, {R});
  const std::string rt = dt::visualize_sharding(r, false);
  if (mesh.get_local_rank(0) == 0) CHECK(rt.find("elements [0, 4)") != std::string::npos);
  // Any number of dims: a 3-d tensor sharded on dim 2 lists one block per rank (w + 1 columns
  // over w ranks: the first block is [0, 2) when w > 1).
  const dt::DTensor three =
      dt::distribute_tensor(dt::test::make_data({2, 3, w + 1}, dt::kFloat32), mesh, {dt::Shard(2)});
  const std::string t3 = dt::visualize_sharding(three, false);
  if (mesh.get_local_rank(0) == 0) {
    CHECK(t3.find("block [0, 2) x [0, 3) x [0, 2)") != std::string::npos);
    CHECK(t3.find(" ranks 0\n") != std::string::npos);
    CHECK(t3.find("global [2, 3, " + std::to_string(w + 1) + "] float32") != std::string::npos);
  }
  // 4-d on a 2-d mesh when the world has one: each block's range is printed for every dim.
  if (w == 4) {
    const dt::DeviceMesh m2 = dt::test::make_mesh({2, 2});
    const dt::DTensor four = dt::distribute_tensor(dt::test::make_data({4, 1, 2, 3}, dt::kFloat32),
                                                   m2, {S0, dt::Shard(3)});
    const std::string t4 = dt::visualize_sharding(four, false);
    if (dt::world_rank() == 0) {
      CHECK(t4.find("[0, 2) x [0, 1) x [0, 2) x [0, 2)") != std::string::npos);
      CHECK(t4.find("[2, 4) x [0, 1) x [0, 2) x [2, 3)") != std::string::npos);
    }
  }
}

TEST_CASE("placement lists from any contiguous range: std::vector, Placements, braces",
          "[dtensor]") {
  const int w = dt::world_size();
  for (const Ints& mesh_shape : dt::test::meshes_for_world(w)) {
    const dt::DeviceMesh mesh = dt::test::make_mesh(mesh_shape);
    const size_t n = mesh_shape.size();
    const dt::Tensor x = dt::test::make_data({w * 3 + 1, 5}, dt::kFloat64);
    // Ranks outside a mesh smaller than the world hold empty shards and compare nothing.
    const bool in = mesh.contains_me();
    // A user's std::vector, built at run time (Shard(0) on mesh dim 0, Replicate elsewhere).
    std::vector<dt::Placement> sharded(n, R);
    sharded[0] = S0;
    const std::vector<dt::Placement> replicated(n, R);
    const dt::DTensor a = dt::distribute_tensor(x, mesh, sharded);
    CHECK(a.placements() == dt::Placements(sharded.begin(), sharded.end()));
    CHECK((!in || dt::equal(a.full_tensor(), x)));
    const dt::DTensor b = a.redistribute(mesh, replicated);
    CHECK(b.placements() == dt::Placements(replicated.begin(), replicated.end()));
    CHECK((!in || dt::equal(b.to_local(), x)));
    // Uneven shards: the global shape is passed (from_local infers even sharding otherwise).
    const dt::DTensor c =
        dt::DTensor::from_local(a.to_local(), mesh, sharded, /*run_check=*/true, x.shape());
    CHECK((!in || dt::equal(c.full_tensor(), x)));
    CHECK((!in || dt::equal(a.redistribute(replicated).to_local(), x)));
    // to_local / full_tensor's grad_placements and DTensorSpec take the same ranges.
    CHECK(dt::equal(a.to_local_dtensor(sharded).to_local(), a.to_local()));
    CHECK((!in || dt::equal(a.full_tensor_dtensor(replicated).to_local(), x)));
    const dt::DTensorSpec spec(mesh, sharded, a.spec().meta());
    CHECK(spec == a.spec());
    CHECK(spec.with_placements(replicated) == b.spec());
    // A wrong-length vector is refused like a wrong-length initializer list.
    const std::vector<dt::Placement> too_many(n + 1, R);
    REQUIRE_THROWS_WITH(dt::distribute_tensor(x, mesh, too_many), Contains("placements"));
  }
}

TEST_CASE("distribute_tensor on the current mesh (MeshGuard)", "[dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::Tensor x = dt::test::make_data({w + 3, 4}, dt::kFloat32);
  dt::MeshGuard guard(mesh);
  const dt::DTensor d = dt::distribute_tensor(x, {S1});
  CHECK(d.device_mesh() == mesh);
  CHECK(dt::equal(d.full_tensor(), x));
}

TEST_CASE("bad inputs raise dtensor::Error on every rank", "[dtensor]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::Tensor x = dt::test::make_data({4, 4}, dt::kFloat32);
  REQUIRE_THROWS_WITH(dt::distribute_tensor(x, mesh, {dt::Shard(2)}),
                      Contains("[distribute_tensor]") && Contains("Shard dim 2"));
  REQUIRE_THROWS_WITH(dt::distribute_tensor(x, mesh, {S0, S1}),
                      Contains("[distribute_tensor]") && Contains("2 placements"));
  REQUIRE_THROWS_WITH(dt::distribute_tensor(x, mesh, {S0}, w + 3),
                      Contains("[distribute_tensor]") && Contains("src_data_rank"));
  const dt::DTensor d = dt::distribute_tensor(x, mesh, {S0});
  const dt::DeviceMesh other = dt::test::make_mesh({1, w});
  // Another mesh is a cross-mesh move (test_redistribute_cross_mesh_mpi), but its placements
  // must fit that mesh.
  REQUIRE_THROWS_WITH(d.redistribute(other, {R}),
                      Contains("[redistribute]") && Contains("placements"));
  REQUIRE_THROWS_WITH(d.redistribute({R, R}), Contains("[redistribute]"));
  REQUIRE_THROWS_WITH(d.redistribute({dt::Shard(5)}),
                      Contains("[redistribute]") && Contains("Shard dim 5"));
  const dt::DTensor pm = dt::distribute_tensor(x, mesh, {Pmax});
  if (mesh.size() > 1) {  // over one rank P(max) -> P(sum) is an exact relabel
    REQUIRE_THROWS_WITH(pm.redistribute({Psum}), Contains("[redistribute]") && Contains("P(max)"));
  }
  REQUIRE_THROWS_WITH(dt::detail::redistribute_no_grad(
                          d, dt::DTensorSpec(other, {R, R}, dt::TensorMeta({5, 4}, dt::kFloat32))),
                      Contains("[redistribute]") && Contains("different tensors"));
  REQUIRE_THROWS_AS(dt::DTensor().full_tensor(), dt::Error);
  // Still usable afterwards: no rank is stuck in a collective.
  CHECK(dt::equal(d.full_tensor(), x));
}

TEST_CASE("check_on_all_ranks: an error found on some ranks is raised on every rank that checks",
          "[dtensor]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const int64_t dims[] = {0};
  dt::check_on_all_ranks(mesh, dims, "");  // nobody failed: returns everywhere
  // The last rank (and, with 4 ranks, rank 1) failed: every rank raises the lowest one's text.
  const bool fails = me == w - 1 || (w > 2 && me == 1);
  const int first = w > 2 ? 1 : w - 1;
  const std::string mine = fails ? "[embedding] bad id on rank " + std::to_string(me) : "";
  if (w > 1) {
    REQUIRE_THROWS_WITH(dt::check_on_all_ranks(mesh, dims, mine),
                        "[embedding] bad id on rank " + std::to_string(first) +
                            " (raised on rank " + std::to_string(first) + ")");
  }
  // Long messages are cut, not lost.
  const std::string long_error = std::string(3000, 'x');
  REQUIRE_THROWS_WITH(dt::check_on_all_ranks(mesh, dims, me == 0 ? long_error : ""),
                      Catch::Contains(std::string(500, 'x')));
  if (w >= 4) {
    // 2-D mesh [2, w/2]: checking over dim 1 only involves this rank's row; the row of the
    // failing rank raises, the other row returns.
    const dt::DeviceMesh m2 = dt::test::make_mesh({2, w / 2});
    const int64_t inner[] = {1}, both[] = {0, 1};
    const std::string err = me == w - 1 ? "[op] bad" : "";
    if (me / (w / 2) == 1) {
      REQUIRE_THROWS_WITH(dt::check_on_all_ranks(m2, inner, err),
                          "[op] bad (raised on rank " + std::to_string(w - 1) + ")");
    } else {
      dt::check_on_all_ranks(m2, inner, err);
    }
    REQUIRE_THROWS_WITH(dt::check_on_all_ranks(m2, both, err),
                        "[op] bad (raised on rank " + std::to_string(w - 1) + ")");
  }
}

// This suite links the core alone (no dtensor::autograd): the members autograd records return
// the same values unrecorded for a DTensor that does not require grad and refuse one that does,
// and the ones that need the engine say what to link.
TEST_CASE("DTensor without the autograd and ops layers", "[dtensor][layering]") {
  REQUIRE(dt::detail::autograd_hooks() == nullptr);
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::Tensor x = dt::test::make_data({w * 2 + 1, 3}, dt::kFloat64);
  dt::DTensor a = dt::distribute_tensor(x, mesh, {S0});
  const dt::DTensor r = a.redistribute({R});
  CHECK(r.is_leaf());
  CHECK_FALSE(r.requires_grad());
  CHECK(dt::equal(r.to_local(), x));
  CHECK(dt::equal(std::move(dt::DTensor(r)).redistribute({S0}).to_local(), a.to_local()));
  CHECK(dt::equal(a.redistribute({R}, /*async_op=*/true).to_local(), x));
  const dt::DTensor l = a.to_local_dtensor();
  CHECK(dt::is_local(l));
  CHECK(l.is_leaf());
  CHECK(dt::equal(l.to_local(), a.to_local()));
  CHECK(dt::equal(a.full_tensor_dtensor().to_local(), x));
  const dt::DTensor f = dt::DTensor::from_local(l, mesh, {S0}, false, x.shape());
  CHECK(f.is_leaf());
  CHECK(dt::equal(f.full_tensor(), x));
  // A DTensor that requires grad is refused by the members autograd would record: its gradient
  // would be lost silently.
  dt::DTensor rg = dt::distribute_tensor(x, mesh, {S0});
  rg.requires_grad_();  // the autograd state lives in the core
  CHECK(rg.requires_grad());
  const std::string lost = "requires grad, but the autograd layer (dtensor::autograd)";
  REQUIRE_THROWS_WITH(rg.redistribute({R}), Contains("[redistribute]") && Contains(lost));
  REQUIRE_THROWS_WITH(rg.redistribute(mesh, {R}), Contains("[redistribute]") && Contains(lost));
  REQUIRE_THROWS_WITH(rg.to_local_dtensor(), Contains("[to_local_dtensor]") && Contains(lost));
  REQUIRE_THROWS_WITH(rg.full_tensor_dtensor(), Contains("[redistribute]") && Contains(lost));
  dt::DTensor rl = dt::local_dtensor(x);
  rl.requires_grad_();
  REQUIRE_THROWS_WITH(dt::DTensor::from_local(rl, mesh, {R}),
                      Contains("[from_local]") && Contains(lost));
  const std::string not_linked = "the autograd layer (dtensor::autograd), which is not linked";
  REQUIRE_THROWS_WITH(a.backward(a), Contains("[backward]") && Contains(not_linked));
  REQUIRE_THROWS_WITH(a.retain_grad(), Contains("[retain_grad]") && Contains(not_linked));
  REQUIRE_THROWS_WITH(a.register_hook([](const dt::DTensor& g) { return g; }),
                      Contains("[register_hook]") && Contains(not_linked));
  // The view members come from the ops layer, not linked here either.
  const std::string no_ops = "the ops layer (dtensor::ops), which is not linked";
  REQUIRE_THROWS_WITH(a.view({-1}), Contains("[DTensor::view]") && Contains(no_ops));
  REQUIRE_THROWS_WITH(a.t(), Contains("[DTensor::t]") && Contains(no_ops));
  REQUIRE_THROWS_WITH(a.clone(), Contains("[DTensor::clone]") && Contains(no_ops));
}
