// DTensor on CUDA meshes (label gpu; mpirun at 1 rank with NCCL, at 2 and 4 ranks with the MPI
// backend staging through pinned memory): distribute_tensor / from_local / full_tensor round
// trips and every redistribute pair, on 1-D and 2-D meshes with even, uneven and empty shards.
// Expectations: the blocks of the full CPU tensor (dtensor_test_util.h), and for partial
// sources the same redistribute run on a CPU mesh of the same shape with the same local data,
// bit for bit, with the same collective counts. Checks use CHECK (not REQUIRE) where a failing
// rank must keep issuing the collectives its peers expect.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/redistribute.h"
#include "dtensor_cuda_test_util.h"

namespace dt = dtensor;
namespace ct = dtensor::cuda_test;
using Catch::Contains;
using dt::test::Ints;

namespace {

using namespace dt::test::placements;

bool has_partial(const dt::Placements& p) {
  for (const dt::Placement& q : p) {
    if (q.is_partial()) return true;
  }
  return false;
}

std::vector<Ints> test_shapes(int64_t w) {
  return {{w * 3 + 1, 5}, {0, 3}, {1, 2 * w + 1}, {2, 7, 3}};
}

// This rank's local data for a DTensor with placements `p` on `mesh`. Without Partial: the block
// of `x`. With Partial: the block of a tensor that differs along the partial mesh dims (and only
// there, so replicas stay identical), i.e. an arbitrary but consistent partial decomposition.
dt::Tensor local_data(const dt::Tensor& x, const Ints& shape, const dt::DeviceMesh& mesh,
                      const dt::Placements& p) {
  if (!mesh.contains_me()) return dt::zeros(dt::Shape(shape.size(), 0), x.dtype());
  if (!has_partial(p)) return dt::test::expected_block(x, mesh, p);
  int salt = 1;
  dt::Placements shards = p;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!p[i].is_partial()) continue;
    shards[i] = R;
    salt = salt * 7 + static_cast<int>(mesh.get_coordinate()[i]);
  }
  return dt::test::expected_block(dt::test::make_data(shape, x.dtype(), salt), mesh, shards);
}

// Every (src, dst) pair over `choices` on a CUDA mesh and a CPU mesh of shape `mesh_shape`.
int64_t run_pairs(const Ints& mesh_shape, const std::vector<dt::Placement>& choices,
                  const std::vector<dt::DType>& dtypes) {
  const dt::DeviceMesh gmesh = ct::cuda_mesh(mesh_shape);
  const dt::DeviceMesh cmesh = dt::test::make_mesh(mesh_shape);
  const auto lists = dt::test::all_placements(choices, mesh_shape.size());
  int64_t pairs = 0;
  for (const Ints& shape : test_shapes(dt::world_size())) {
    const dt::IntSpan gshape(shape.data(), shape.size());
    for (dt::DType dtype : dtypes) {
      const dt::Tensor x = dt::test::make_data(shape, dtype, 0);
      for (const dt::Placements& src : lists) {
        const dt::Tensor local = local_data(x, shape, cmesh, src);
        const dt::DTensor a_cpu = dt::DTensor::from_local(local, cmesh, src, false, gshape);
        const dt::DTensor a_gpu =
            dt::DTensor::from_local(local.to(ct::gpu()), gmesh, src, false, gshape);
        CHECK(ct::on_my_gpu(a_gpu.to_local()));
        const dt::Tensor before = a_gpu.to_local().clone();
        for (const dt::Placements& dst : lists) {
          INFO(dt::test::describe(mesh_shape, shape, dtype)
               << " " << dt::placements_str(src) << " -> " << dt::placements_str(dst));
          bool has_plan = true;
          try {
            (void)dt::plan_redistribute(a_cpu.spec(), a_cpu.spec().with_placements(dst));
          } catch (const dt::Error&) {
            has_plan = false;
          }
          if (!has_plan) {
            CHECK_THROWS_WITH(a_gpu.redistribute(dst), Contains("[redistribute]"));
            continue;
          }
          dt::CommDebugMode cpu_comm;
          const dt::DTensor b_cpu = a_cpu.redistribute(cmesh, dst);
          const int64_t cpu_count = cpu_comm.total_count();
          dt::CommDebugMode gpu_comm;
          const dt::DTensor b_gpu = a_gpu.redistribute(gmesh, dst);
          CHECK(gpu_comm.total_count() == cpu_count);
          CHECK(ct::on_my_gpu(b_gpu.to_local()));
          CHECK(b_gpu.to_local().shape() == b_gpu.spec().local_shard().shape);
          CHECK(dt::equal(b_gpu.to_local(), b_cpu.to_local()));
          if (!has_partial(src) && !has_partial(dst)) {
            CHECK(dt::equal(b_gpu.to_local(), dt::test::expected_block(x, cmesh, dst)));
          }
          CHECK(dt::equal(a_gpu.to_local(), before));  // the source is never modified
          ++pairs;
        }
      }
    }
  }
  return pairs;
}

}  // namespace

TEST_CASE("CUDA DTensor: distribute_tensor / from_local / full_tensor round trip", "[cuda]") {
  const int w = dt::world_size();
  for (const Ints& mesh_shape : dt::test::meshes_for_world(w)) {
    const dt::DeviceMesh mesh = ct::cuda_mesh(mesh_shape);
    const std::vector<dt::Placement> choices =
        mesh_shape.size() == 1
            ? std::vector<dt::Placement>{R, S0, S1, dt::Shard(-1), Psum, Pavg, Pmax, Pmin}
            : std::vector<dt::Placement>{R, S0, S1, Psum};
    for (const Ints& shape : test_shapes(w)) {
      for (dt::DType dtype : {dt::kFloat32, dt::kInt64, dt::kBFloat16, dt::kFloat16}) {
        const dt::Tensor x = dt::test::make_data(shape, dtype, 3);
        for (const dt::Placements& p : dt::test::all_placements(choices, mesh_shape.size())) {
          INFO(dt::test::describe(mesh_shape, shape, dtype) << " " << dt::placements_str(p));
          const dt::DTensor d = dt::distribute_tensor(x, mesh, p);
          CHECK(ct::on_my_gpu(d.to_local()));
          CHECK(d.to_local().shape() == d.spec().local_shard().shape);
          if (!has_partial(p)) {
            CHECK(dt::equal(d.to_local(), dt::test::expected_block(x, mesh, p)));
            // from_local with a CPU shard: moved to this rank's GPU, shapes checked across ranks.
            const dt::DTensor f =
                dt::DTensor::from_local(dt::test::expected_block(x, mesh, p), mesh, p, true,
                                        dt::IntSpan(shape.data(), shape.size()));
            CHECK(ct::on_my_gpu(f.to_local()));
            CHECK(dt::equal(f.full_tensor(), x));
          }
          const dt::Tensor full = d.full_tensor();
          CHECK(ct::on_my_gpu(full));
          CHECK(dt::equal(full, x));
        }
        // From rank 0's data only (one broadcast per mesh dim).
        const dt::Tensor mine = dt::world_rank() == 0 ? x : dt::zeros_like(x);
        const dt::Placements s0(mesh_shape.size(), shape[0] > 0 ? S0 : R);
        const dt::DTensor b = dt::distribute_tensor(mine, mesh, s0, 0);
        CHECK(dt::equal(b.full_tensor(), x));
      }
    }
  }
}

TEST_CASE("CUDA DTensor: from_local shape mismatch is reported on every rank", "[cuda]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = ct::cuda_mesh({w});
  const int64_t rows = dt::world_rank() == 0 ? 3 : 2;
  const dt::Tensor local = dt::zeros({rows, 4}, dt::TensorOptions(dt::kFloat32, ct::gpu()));
  // Shard(0) of [2 w, 4] gives 2 rows each: rank 0's 3 rows are wrong.
  REQUIRE_THROWS_WITH(dt::DTensor::from_local(local, mesh, {S0}, true, {2 * w, 4}),
                      Contains("[from_local]") && Contains("rank 0"));
}

TEST_CASE("CUDA DTensor: every redistribute pair on a 1-d mesh equals the CPU mesh's",
          "[cuda][redistribute]") {
  const int w = dt::world_size();
  const int64_t pairs = run_pairs({w}, {R, S0, S1, dt::Shard(-1), Psum, Pavg, Pmax, Pmin},
                                  {dt::kFloat32, dt::kInt64, dt::kBFloat16});
  CHECK(pairs > 0);
}

TEST_CASE("CUDA DTensor: every redistribute pair on 2-d meshes equals the CPU mesh's",
          "[cuda][redistribute]") {
  const int w = dt::world_size();
  int64_t pairs = 0;
  for (const Ints& mesh_shape : ct::mesh_shapes_1d_2d(w)) {
    if (mesh_shape.size() != 2) continue;
    pairs += run_pairs(mesh_shape, {R, S0, S1, Psum}, {dt::kFloat32, dt::kInt64});
  }
  CHECK(pairs > 0);
}

TEST_CASE("CUDA DTensor: collective counts of the basic transitions", "[cuda][redistribute]") {
  const int w = dt::world_size();
  // A mesh dim of size 1 needs no collective (the planner skips it, as on a CPU mesh).
  const int64_t one = w > 1 ? 1 : 0;
  const dt::DeviceMesh mesh = ct::cuda_mesh({w});
  const dt::Tensor x = dt::test::make_data({w * 2 + 1, 4}, dt::kFloat32);
  const dt::DTensor s = dt::distribute_tensor(x, mesh, {S0});
  {
    dt::CommDebugMode comm;
    CHECK(dt::equal(s.redistribute({R}).to_local(), x));
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == one);
    CHECK(comm.total_count() == one);
  }
  const dt::DTensor p = dt::distribute_tensor(x, mesh, {Psum});
  {
    dt::CommDebugMode comm;
    CHECK(dt::equal(p.redistribute({R}).to_local(), x));
    CHECK(comm.count(dt::CollectiveKind::kAllReduce) == one);
  }
  {
    dt::CommDebugMode comm;
    CHECK(dt::equal(p.redistribute({S0}).to_local(), dt::test::expected_block(x, mesh, {S0})));
    CHECK(comm.count(dt::CollectiveKind::kReduceScatter) == one);
  }
  {
    dt::CommDebugMode comm;
    CHECK(dt::equal(s.redistribute({S1}).to_local(), dt::test::expected_block(x, mesh, {S1})));
    CHECK(comm.count(dt::CollectiveKind::kAllToAll) == one);
  }
}

TEST_CASE("CUDA DTensor: cross-mesh redistribute between a CPU mesh and a CUDA mesh",
          "[cuda][redistribute][cross_mesh]") {
  const int w = dt::world_size();
  const dt::DeviceMesh gmesh = ct::cuda_mesh({w});
  const dt::DeviceMesh cmesh = dt::test::make_mesh({w});
  // The first rank alone, on the CPU: the CUDA mesh's pieces gather there.
  const dt::DeviceMesh first(dt::kCPU, {1}, {0});
  for (const Ints& shape : test_shapes(w)) {
    const dt::Tensor x = dt::test::make_data(shape, dt::kFloat32, 5);
    for (const dt::Placements& sp : {dt::Placements{S0}, dt::Placements{S1}, dt::Placements{R}}) {
      INFO(dt::placements_str(sp) << " shape " << dt::shape_str(x.shape()));
      const dt::DTensor c = dt::distribute_tensor(x, cmesh, sp);
      {
        // Same ranks, same placements: every rank already holds its piece, so nothing is sent.
        dt::CommDebugMode comm;
        const dt::DTensor g = c.redistribute(gmesh, sp);
        CHECK(g.to_local().device().is_cuda());
        CHECK(dt::equal(g.to_local(), dt::test::expected_block(x, gmesh, sp)));
        int64_t data = 0;
        for (const auto& r : comm.records()) {
          if (r.op == "redistribute") data += r.count;
        }
        CHECK(data == 0);
        // CUDA -> CPU with other placements, then to one CPU rank, exact.
        const dt::DTensor back = g.redistribute(cmesh, {S1});
        CHECK(back.to_local().device().is_cpu());
        CHECK(dt::equal(back.to_local(), dt::test::expected_block(x, cmesh, {S1})));
        const dt::DTensor one = g.redistribute(first, {R});
        if (first.contains_me()) CHECK(dt::equal(one.to_local(), x));
      }
    }
  }
}
