// Cross-mesh redistribute under mpirun (1, 2, 4, 8 ranks): a DTensor moved to a mesh of another
// shape, a subset of the ranks, a disjoint group or the same ranks in another order holds
// exactly the target's blocks and comes back bit for bit; each piece a rank lacks is received
// once (the gradient: tests/autograd/test_redistribute_grad_mpi.cc); ranks that ask for different
// moves all raise. Checks use CHECK (not REQUIRE) so a failing rank keeps issuing what its peers
// expect.
#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/shape_ops.h"
#include "tests/common/dtensor_test_util.h"
#include "tests/core/cross_mesh_test_util.h"

namespace dt = dtensor;
using Catch::Contains;
using dt::test::Ints;

namespace {

using namespace dt::test::placements;
using namespace dt::test::cross_mesh;

dt::Placements without_partial(dt::Placements p) {
  for (dt::Placement& q : p) {
    if (q.is_partial()) q = R;
  }
  return p;
}

// A DTensor with logical value x on (mesh, p): Partial made by a local Replicate -> Partial.
dt::DTensor place(const dt::Tensor& x, const dt::DeviceMesh& mesh, const dt::Placements& p) {
  const dt::DTensor a = dt::distribute_tensor(x, mesh, without_partial(p));
  return has_partial(p) ? a.redistribute(mesh, p) : a;
}

// Bytes this rank received as data (not agreement) messages in `comm`.
int64_t data_bytes_received(const dt::CommDebugMode& comm) {
  int64_t bytes = 0;
  for (const auto& r : comm.records()) {
    if (r.op == "redistribute" && r.kind == dt::CollectiveKind::kRecv) bytes += r.bytes;
  }
  return bytes;
}

// Elements of this rank's target block it does not hold in its source block (what it must
// receive), both without Partial.
int64_t elements_missing(const dt::DTensorSpec& src, const dt::DTensorSpec& dst) {
  if (!dst.mesh().contains_me()) return 0;
  const dt::LocalShard want = dst.local_shard();
  const int64_t total = dt::shape_numel(want.shape);
  if (!src.mesh().contains_me()) return total;
  const dt::LocalShard have = src.local_shard();
  dt::Shape off, shape;
  const bool held =
      dt::box_intersection(want.offset, want.shape, have.offset, have.shape, off, shape);
  return total - (held ? dt::shape_numel(shape) : 0);
}

}  // namespace

TEST_CASE("cross-mesh redistribute: every mesh pair and placement pair, exact both ways",
          "[redistribute][cross_mesh]") {
  const int w = dt::world_size();
  const std::vector<NamedMesh> meshes = meshes_of_world(w);
  const std::vector<Ints> shapes = {{7, 5}, {8, 4}, {3, 0}, {2, 3}};
  int64_t moves = 0;
  for (const NamedMesh& from : meshes) {
    for (const NamedMesh& to : meshes) {
      if (from.mesh == to.mesh) continue;
      for (const Ints& shape : shapes) {
        for (dt::DType dtype : {dt::kFloat32, dt::kInt64}) {
          const dt::Tensor x = dt::test::make_data(shape, dtype, 3);
          for (const dt::Placements& sp : lists_for(from.mesh)) {
            for (const dt::Placements& dp : lists_for(to.mesh)) {
              INFO(from.name << " " << dt::placements_str(sp) << " -> " << to.name << " "
                             << dt::placements_str(dp) << " shape "
                             << dt::shape_str(dt::IntSpan(shape.data(), shape.size())) << " "
                             << dt::dtype_name(dtype));
              const dt::DTensor a = place(x, from.mesh, sp);
              const dt::Tensor before = a.to_local().clone();
              dt::CommDebugMode comm;
              const dt::DTensor y = a.redistribute(to.mesh, dp);
              ++moves;
              CHECK(y.device_mesh() == to.mesh);
              CHECK(y.placements() == dp);
              CHECK(y.shape() == x.shape());
              CHECK(dt::equal(a.to_local(), before));  // the input is never modified
              const bool in_either = from.mesh.contains_me() || to.mesh.contains_me();
              if (!in_either) CHECK(comm.total_count() == 0);
              if (!to.mesh.contains_me()) CHECK(y.to_local().numel() == 0);
              if (has_partial(dp)) {
                const dt::DTensor full = y.redistribute(to.mesh, without_partial(dp));
                if (to.mesh.contains_me()) {
                  CHECK(dt::equal(full.to_local(),
                                  dt::test::expected_block(x, to.mesh, without_partial(dp))));
                }
              } else {
                if (to.mesh.contains_me()) {
                  CHECK(dt::equal(y.to_local(), dt::test::expected_block(x, to.mesh, dp)));
                }
                if (!has_partial(sp)) {
                  // Each piece a rank lacks arrives once; nothing else is received as data.
                  const dt::DTensorSpec src(from.mesh, sp, dt::TensorMeta(x.shape(), dtype));
                  const dt::DTensorSpec dst(to.mesh, dp, dt::TensorMeta(x.shape(), dtype));
                  CHECK(data_bytes_received(comm) ==
                        elements_missing(src, dst) * static_cast<int64_t>(dt::dtype_size(dtype)));
                }
              }
              // And back: exactly the source's blocks (Partial comes back reduced).
              const dt::DTensor z = y.redistribute(from.mesh, without_partial(sp));
              CHECK(z.device_mesh() == from.mesh);
              if (from.mesh.contains_me()) {
                CHECK(dt::equal(z.to_local(),
                                dt::test::expected_block(x, from.mesh, without_partial(sp))));
              }
            }
          }
        }
      }
    }
  }
  if (dt::world_rank() == 0) std::cout << "cross-mesh moves checked: " << moves << "\n";
  CHECK(moves > 0);
}

TEST_CASE("cross-mesh redistribute: ranks asking for different moves all raise",
          "[redistribute][cross_mesh]") {
  const int w = dt::world_size();
  if (w < 2) return;
  const std::vector<NamedMesh> meshes = meshes_of_world(w);
  const dt::DeviceMesh& all = meshes[0].mesh;
  const dt::DeviceMesh& first = meshes[1].mesh;
  const dt::Tensor x = dt::test::make_data({8, 6}, dt::kFloat32, 0);
  const dt::DTensor a = dt::distribute_tensor(x, all, {S0});
  // The last rank wants columns where the others want rows.
  const bool odd_one = dt::world_rank() == w - 1;
  CHECK_THROWS_WITH(a.redistribute(first, {odd_one ? S1 : S0}),
                    Contains("the ranks of a cross-mesh redistribute disagree") &&
                        Contains("rank " + std::to_string(w - 1) + " moves"));
  // A local shard that does not fit its spec on one rank: every rank raises, naming it.
  const dt::Tensor mine = odd_one ? dt::zeros({1, 1}) : a.to_local();
  CHECK_THROWS_WITH(dt::redistribute_cross_mesh_local(
                        mine, a.spec(), dt::DTensorSpec(first, {S0}, a.spec().meta())),
                    Contains("disagree") && Contains("local shard is [1, 1]"));
  // Nothing was left in flight: the next move works.
  const dt::DTensor y = a.redistribute(first, {S1});
  if (first.contains_me()) CHECK(dt::equal(y.to_local(), dt::test::expected_block(x, first, {S1})));
}
