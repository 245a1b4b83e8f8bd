// DTensor softmax/log_softmax (mpirun at 1, 2 and 4 ranks): for every input placement list (R,
// S(d) for each d, P(sum)) on a 1-D and a 2-D mesh, even and uneven shapes, the result equals
// the op on the full tensor; dims other than the softmax dim keep their shard without
// communication; bad dims raise errors naming the op.
#include <catch2/catch.hpp>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/softmax/softmax.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Shard;
using dt::Tensor;

TEST_CASE("dtensor softmax and log_softmax equal the full-tensor op for every placement") {
  const int64_t w = dt::world_size();
  for (const tt::Ints& shape :
       {tt::Ints{w * 3 + 1, 5, 2}, tt::Ints{2 * w, 3, w + 1}, tt::Ints{0, 3, 2}}) {
    const Tensor x = tt::det_input(shape, 1, -3.0, 0.7);
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      for (const Placements& p : tt::all_placements(tt::shard_choices(shape.size()), mesh.ndim())) {
        const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
        for (int64_t dim : {0, 1, -1}) {
          INFO(tt::describe(mesh, {p}, shape) << " dim " << dim);
          const DTensor y = dt::softmax(dx, dim);
          CHECK(tt::same_values(y.full_tensor(), dt::softmax(x, dim)));
          const DTensor z = dt::log_softmax(dx, dim);
          CHECK(tt::same_values(z.full_tensor(), dt::log_softmax(x, dim)));
          // The softmax dim is never left sharded, other shards survive.
          const int64_t nd = dim < 0 ? dim + 3 : dim;
          for (int64_t m = 0; m < mesh.ndim(); ++m) {
            CHECK_FALSE(y.placements()[m].is_shard(nd));
            CHECK_FALSE(y.placements()[m].is_partial());
            // (On size-1 mesh dims and empty tensors every move is free, so ties may go either
            // way.)
            if (p[m].is_shard() && p[m].dim() != nd && mesh.size(m) > 1 && x.numel() > 0) {
              CHECK(y.placements()[m] == p[m]);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("dtensor softmax over an unsharded dim issues no collective") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({w * 2 + 1, 7});
  const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  dt::CommDebugMode comm;
  const DTensor y = dt::softmax(dx, 1);
  CHECK(comm.total_count() == 0);
  CHECK(y.placements() == Placements{Shard(0)});
  CHECK(tt::same_values(y.full_tensor(), dt::softmax(x, 1)));
}

TEST_CASE("dtensor softmax errors name the op") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor dx = dt::distribute_tensor(tt::det_input({w, 3}), mesh, {Shard(0)}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::softmax(dx, 2), Catch::Contains("[softmax]"));
  REQUIRE_THROWS_WITH(dt::log_softmax(dx, -3), Catch::Contains("[log_softmax]"));
  const DTensor di =
      dt::distribute_tensor(tt::det_input({w, 3}).to(dt::kInt64), mesh, {Shard(0)}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::softmax(di, 1), Catch::Contains("[softmax]"));
  REQUIRE_THROWS_AS(dt::softmax(DTensor(), 0), dt::Error);
}
