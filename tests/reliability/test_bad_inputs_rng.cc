// Bad-input catalogue, random ops (built into test_bad_inputs when the rng layer exists):
// a random op on a Partial DTensor is refused on every rank, and nothing is drawn.
#include <catch2/catch.hpp>
#include <thread>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"

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

TEST_CASE("threads: DTensor random ops on a default generator from a second thread are refused") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  manual_seed(7);
  // One thread draws a Replicate tensor, then another thread draws from the same default
  // generator: the two threads' order could differ between ranks, so the replicas would differ.
  DTensor first;
  std::thread other([&] { first = rand(Shape{4}, mesh, {Replicate()}); });
  other.join();
  REQUIRE_THROWS_WITH(rand(Shape{4}, mesh, {Replicate()}),
                      Contains("[rand] the default cpu generator was used by another thread"));
  // Seeding on this thread hands the generator over; an explicit Generator per thread is free.
  manual_seed(7);
  const DTensor again = rand(Shape{4}, mesh, {Replicate()});
  CHECK(equal(again.to_local(), first.to_local()));
  Generator mine(11);
  std::thread own([&] { (void)rand(Shape{4}, mesh, {Replicate()}, kFloat32, &mine); });
  own.join();
  world_communicator()->barrier()->wait();
}

TEST_CASE("size checks: a sharded random tensor whose numel overflows is refused") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  // Was: UBSan signed overflow in dtensor/tensor/shape.cc, then a segfault. Now the first size
  // computation that overflows raises: today the local shard's allocation ("[empty] shape
  // [2^40 / w, 2^40] has more elements than int64 can count"), since the global spec does not
  // compute its numel before.
  const int64_t big = int64_t{1} << 40;
  REQUIRE_THROWS_WITH(rand(Shape{big, big}, mesh, {Shard(0)}),
                      Contains(", 1099511627776] has more elements than int64 can count"));
  world_communicator()->barrier()->wait();
}

}  // namespace
}  // namespace dtensor
