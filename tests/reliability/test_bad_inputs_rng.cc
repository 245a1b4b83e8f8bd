// Bad-input catalogue, random ops (built into test_bad_inputs when the rng layer exists):
// a random op on a Partial DTensor is refused on every rank, and nothing is drawn.
#include <catch2/catch.hpp>

#include "collectives/runtime.h"
#include "device_mesh/device_mesh.h"
#include "dtensor/distributed_tensor.h"
#include "rng/dtensor_random.h"
#include "tensor/compare.h"
#include "tensor/creation.h"

namespace dtensor {
namespace {

using Catch::Contains;

TEST_CASE("bad input: random op on a Partial DTensor") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const DTensor p = distribute_tensor(zeros({2 * w + 1, 3}), mesh, {Partial()});
  REQUIRE_THROWS_AS(uniform_(p), Error);
  REQUIRE_THROWS_WITH(uniform_(p), Contains("[uniform_]") && Contains("P(sum)"));
  REQUIRE_THROWS_WITH(normal_(p), Contains("[normal_]") && Contains("Partial"));
  REQUIRE_THROWS_WITH(dropout(p, 0.5), Contains("[dropout]") && Contains("Partial"));
  REQUIRE_THROWS_WITH(rand(Shape{4, 2}, mesh, {Partial(ReduceOp::kMax)}),
                      Contains("[rand]") && Contains("P(max)"));
  // The refused calls drew nothing: the local values are still zero.
  REQUIRE(equal(p.full_tensor(), zeros({2 * w + 1, 3})));
  world_communicator()->barrier()->wait();
}

}  // namespace
}  // namespace dtensor
