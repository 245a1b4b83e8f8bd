// DTensor layer_norm/rms_norm (mpirun at 1, 2 and 4 ranks): for every input placement list (R,
// S(d) for each d, P(sum)) on a 1-D and a 2-D mesh, with replicated, sharded and Partial
// weight/bias, even and uneven shapes, the result equals the op on the full tensors; sequence
// sharding S(1) (SequenceParallel) needs no communication; bad shapes raise errors.
#include <catch2/catch.hpp>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/norm/norm.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Shard;
using dt::Tensor;

TEST_CASE("dtensor layer_norm and rms_norm equal the full-tensor op for every placement") {
  const int64_t w = dt::world_size();
  const st::Ints shape = {w * 3 + 1, 3, 6};
  const Tensor x = st::det_input(shape, 2, -2.0, 0.45);
  for (const st::Ints& ns : {st::Ints{6}, st::Ints{3, 6}}) {
    const dt::IntSpan nss(ns.data(), ns.size());
    const Tensor wt = st::det_input(ns, 3, 0.5, 0.25), bs = st::det_input(ns, 4, -1.0, 0.5);
    const Tensor want_ln = dt::layer_norm(x, nss, wt, bs, 1e-5);
    const Tensor want_ln0 = dt::layer_norm(x, nss);
    const Tensor want_rms = dt::rms_norm(x, nss, wt, 1e-6);
    for (const dt::DeviceMesh& mesh : st::family_meshes()) {
      const auto wlists = st::all_placements({dt::Replicate(), Shard(0), dt::Partial()},
                                             static_cast<size_t>(mesh.ndim()));
      for (const Placements& p :
           st::all_placements(st::shard_choices(shape.size()), static_cast<size_t>(mesh.ndim()))) {
        const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
        for (const Placements& pw : {wlists.front(), wlists[wlists.size() / 2], wlists.back()}) {
          INFO(st::describe(mesh, {p}, shape)
               << " weight " << dt::placements_str(pw) << " normalized " << ns.size() << " dims");
          const DTensor dw = dt::distribute_tensor(wt, mesh, pw, std::nullopt);
          const DTensor db = dt::distribute_tensor(bs, mesh, pw, std::nullopt);
          const DTensor y = dt::layer_norm(dx, nss, dw, db, 1e-5);
          CHECK(st::same_values(y.full_tensor(), want_ln, 1e-5));
          CHECK(st::same_values(dt::rms_norm(dx, nss, dw, 1e-6).full_tensor(), want_rms, 1e-5));
          for (int64_t m = 0; m < mesh.ndim(); ++m) {
            CHECK_FALSE(y.placements()[m].is_partial());
            if (y.placements()[m].is_shard())
              CHECK(y.placements()[m].dim() < 3 - (int64_t)ns.size());
          }
        }
        CHECK(st::same_values(dt::layer_norm(dx, nss).full_tensor(), want_ln0, 1e-5));
      }
    }
  }
}

TEST_CASE("dtensor layer_norm on sequence-sharded activations needs no communication") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = st::det_input({2, w * 2 + 1, 8});
  const Tensor wt = st::det_input({8}, 1, 0.5, 0.25);
  const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(1)}, std::nullopt);
  const DTensor dw = dt::distribute_tensor(wt, mesh, {dt::Replicate()}, std::nullopt);
  dt::CommDebugMode comm;
  const DTensor y = dt::layer_norm(dx, {8}, dw);
  const DTensor z = dt::rms_norm(dx, {8}, dw);
  CHECK(comm.total_count() == 0);
  CHECK(y.placements() == Placements{Shard(1)});
  CHECK(z.placements() == Placements{Shard(1)});
  CHECK(st::same_values(y.full_tensor(), dt::layer_norm(x, {8}, wt)));
  CHECK(st::same_values(z.full_tensor(), dt::rms_norm(x, {8}, wt)));
}

TEST_CASE("dtensor norm errors name the op and the argument") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor dx =
      dt::distribute_tensor(st::det_input({w, 3, 4}), mesh, {Shard(0)}, std::nullopt);
  const DTensor bad_w =
      dt::distribute_tensor(st::det_input({3}), mesh, {dt::Replicate()}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::layer_norm(dx, {3}), Catch::Contains("[layer_norm] normalized_shape"));
  REQUIRE_THROWS_WITH(dt::layer_norm(dx, {4}, bad_w), Catch::Contains("argument weight"));
  REQUIRE_THROWS_WITH(dt::rms_norm(dx, {5}), Catch::Contains("[rms_norm]"));
  REQUIRE_THROWS_WITH(dt::rms_norm(dx, {4}, bad_w), Catch::Contains("[rms_norm]"));
}
