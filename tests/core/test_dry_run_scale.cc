// Planning and sharding propagation at 1,024 and 65,536 ranks (issue 46): under the fake backend
// (ctest runs this with DTENSOR_BACKEND=fake and DTENSOR_FAKE_WORLD_SIZE=1024 or 65536) one
// process builds 1-D to 4-D meshes of the whole world, dispatches ops on DTensors over them and
// redistributes them; everything completes, and the propagation and plan caches hit on the second
// pass exactly as at small scale (the keys do not grow with the mesh).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/core/redistribute.h"
#include "test_ops.h"

namespace dt = dtensor;
namespace tt = dtensor::testing;
using dt::Placements;
using dt::Replicate;
using dt::Shard;

namespace {

// 1-D to 4-D meshes of the whole world (a power of two of at least 256).
std::vector<dt::Shape> mesh_shapes(int64_t w) {
  int64_t a = 1;
  while (a * a < w) a *= 2;  // w = a * (w / a), a >= w / a
  const int64_t b = w / a;
  return {{w}, {b, a}, {b, 4, a / 4}, {b / 2, 2, 4, a / 4}};
}

// dp-style batch rows sharded over mesh dim 0, the rest replicated.
Placements rows_on_dim0(int64_t ndim) {
  Placements p(static_cast<size_t>(ndim), Replicate());
  p[0] = Shard(0);
  return p;
}

// Placements with Shard(0) on every mesh dim (rows split over the whole mesh).
Placements rows_everywhere(int64_t ndim) {
  return Placements(static_cast<size_t>(ndim), Shard(0));
}

// One pass of a small forward: mm, relu, add, sum (Partial), then redistributes.
void one_pass(const dt::DeviceMesh& mesh, int64_t rows) {
  const int64_t nd = mesh.ndim();
  const dt::DTensor x = dt::zeros({rows, 8}, mesh, rows_on_dim0(nd));
  const dt::DTensor w = dt::zeros({8, 4}, mesh, Placements(static_cast<size_t>(nd), Replicate()));
  const dt::DTensor h = tt::t_relu(tt::t_mm(x, w));
  const dt::DTensor y = tt::t_add(h, h, 0.5);
  const dt::DTensor s = tt::t_sum(y, 0);
  REQUIRE(s.shape() == dt::Shape{4});
  // Shard(0) on dim 0 -> everywhere (local chunking), then back to replicated (all-gathers).
  const dt::DTensor spread = x.redistribute(mesh, rows_everywhere(nd));
  const dt::DTensor full =
      spread.redistribute(mesh, Placements(static_cast<size_t>(nd), Replicate()));
  REQUIRE(full.to_local().sizes() == dt::Shape{rows, 8});
}

}  // namespace

TEST_CASE("dry run at scale: meshes of the fake world build, ops and plans complete and cache",
          "[fake][scale]") {
  REQUIRE(dt::fake_backend());
  const int64_t w = dt::world_size();
  REQUIRE(w >= 256);
  for (const dt::Shape& shape : mesh_shapes(w)) {
    const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, shape);
    INFO(mesh.str());
    REQUIRE(mesh.size() == w);
    for (int64_t d = 0; d < mesh.ndim(); ++d) {
      REQUIRE(mesh.size(d) == shape[static_cast<size_t>(d)]);
      REQUIRE(mesh.communicator(d)->size() == shape[static_cast<size_t>(d)]);
    }
    dt::clear_propagation_cache();
    dt::clear_redistribute_plan_cache();
    const int64_t rows = 2 * w;
    one_pass(mesh, rows);
    const dt::PropagationCacheStats p1 = dt::propagation_cache_stats();
    const dt::PlanCacheStats r1 = dt::redistribute_plan_cache_stats();
    CHECK(p1.misses >= 4);  // mm, relu, add, sum at least
    CHECK(r1.misses >= 2);  // the two redistributes at least

    // The second pass plans and propagates nothing new.
    dt::CommDebugMode comm;
    one_pass(mesh, rows);
    const dt::PropagationCacheStats p2 = dt::propagation_cache_stats();
    const dt::PlanCacheStats r2 = dt::redistribute_plan_cache_stats();
    CHECK(p2.misses == p1.misses);
    CHECK(p2.hits > p1.hits);
    CHECK(r2.misses == r1.misses);
    CHECK(r2.hits > r1.hits);
    CHECK(p2.evictions == 0);
    // The gather to replicated moved data on every mesh dim (the fake backend counts it).
    CHECK(comm.count(dt::CollectiveKind::kAllGather) >= 1);
  }
}

TEST_CASE("dry run at scale: the pure planner at this world size", "[fake][scale]") {
  const int64_t w = dt::world_size();
  for (const dt::Shape& shape : mesh_shapes(w)) {
    const int64_t nd = static_cast<int64_t>(shape.size());
    Placements src(static_cast<size_t>(nd), Shard(0));
    Placements dst(static_cast<size_t>(nd), Replicate());
    dst[static_cast<size_t>(nd - 1)] = Shard(1);
    const dt::RedistributePlan plan =
        dt::plan_redistribute({4 * w, 4 * w}, dt::kFloat32, shape, src, dst, dt::CostModel{});
    INFO(plan.str());
    CHECK_FALSE(plan.steps.empty());
    CHECK(plan.cost > 0);
  }
}
