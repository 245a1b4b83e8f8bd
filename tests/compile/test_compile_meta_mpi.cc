// dtensor::compile of a step on the meta device (issue 46) under mpirun at 1 and 2 ranks: it is
// refused up front on every rank with a [compile] error naming the meta device — whether the
// step's inputs or the state it computes on (a parameter) are meta — and nothing is captured;
// the same step on the CPU still compiles.
#include <catch2/catch.hpp>

#include "dtensor/dtensor.h"

namespace dt = dtensor;

namespace {

dt::DTensor sharded(dt::Device device) {
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"tp"});
  const int64_t w = dt::world_size();
  return dt::DTensor::from_local(dt::ones({4, 3}, dt::TensorOptions(dt::kFloat32, device)), mesh,
                                 {dt::Shard(0)}, false, dt::Shape{4 * w, 3});
}

dt::DTensorList step(const dt::DTensorList& in, const dt::DTensor& w) {
  return dt::DTensorList{dt::sum(dt::mul(dt::add(in[0], w), w))};
}

}  // namespace

TEST_CASE("compile refuses a step whose inputs are on the meta device", "[compile][meta]") {
  const dt::DTensor w = sharded(dt::Device(dt::kMeta));
  auto compiled = dt::compile([&](const dt::DTensorList& in) { return step(in, w); });
  REQUIRE_THROWS_WITH(compiled({sharded(dt::Device(dt::kMeta))}),
                      Catch::Contains("[compile] cannot capture a step on the meta device: input "
                                      "0 of the step"));
  CHECK(compiled.captures() == 0);
  CHECK_THROWS_WITH(compiled.graph(), Catch::Contains("no graph"));
}

TEST_CASE("compile refuses a step computing on meta state", "[compile][meta]") {
  const dt::DTensor w = sharded(dt::Device(dt::kMeta));
  auto compiled =
      dt::compile([&](const dt::DTensorList&) { return dt::DTensorList{dt::sum(dt::mul(w, w))}; });
  REQUIRE_THROWS_WITH(compiled({}), Catch::Contains("[compile] the step cannot be captured: it "
                                                    "runs mul on the meta device"));
  CHECK(compiled.captures() == 0);
  // The eager step on meta runs (a dry run's way).
  CHECK(dt::sum(dt::mul(w, w)).device().is_meta());
}

TEST_CASE("the same step on the CPU compiles and replays", "[compile][meta]") {
  const dt::DTensor w = sharded(dt::Device());
  auto compiled = dt::compile([&](const dt::DTensorList& in) { return step(in, w); });
  const dt::DTensor x = sharded(dt::Device());
  const dt::DTensor eager = step({x}, w)[0];
  CHECK(compiled({x})[0].full_tensor().item<float>() == eager.full_tensor().item<float>());
  CHECK(compiled({x})[0].full_tensor().item<float>() == eager.full_tensor().item<float>());
  CHECK(compiled.captures() == 1);
  CHECK(compiled.replays() == 1);
}
