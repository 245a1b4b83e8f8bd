// Bad-input catalogue, DTensor ops (built into test_bad_inputs when the ops layer has its op
// registry): mixed dtypes, mismatched shapes, a wrong numel, inputs on different meshes and an
// in-place op that would change placements are refused on every rank with the op and the
// argument in the message.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "collectives/runtime.h"
#include "device_mesh/device_mesh.h"
#include "dtensor/distributed_tensor.h"
#include "ops/elementwise/elementwise.h"
#include "ops/reduction/reduction.h"
#include "ops/softmax/softmax.h"
#include "ops/view/view.h"
#include "tensor/compare.h"
#include "tensor/creation.h"

namespace dtensor {
namespace {

using Catch::Contains;

DTensor make(const DeviceMesh& mesh, const Shape& shape, DType dtype, Placements p) {
  return distribute_tensor(zeros(shape, TensorOptions(dtype)), mesh, std::move(p));
}

TEST_CASE("bad input: DTensor op with mixed dtypes") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const DTensor a = make(mesh, {2 * w, 3}, kFloat32, {Shard(0)});
  const DTensor b = make(mesh, {2 * w, 3}, kInt32, {Shard(0)});
  REQUIRE_THROWS_AS(cat({a, b}, 0), Error);
  REQUIRE_THROWS_WITH(cat({a, b}, 0), Contains("[cat]") && Contains("int32"));
  REQUIRE_THROWS_WITH(softmax(make(mesh, {w, 3}, kInt64, {Shard(0)}), 1),
                      Contains("softmax") && Contains("int64"));
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: DTensor op with mismatched shapes") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const DTensor a = make(mesh, {2 * w + 1, 3}, kFloat32, {Shard(0)});
  const DTensor b = make(mesh, {2 * w + 1, 4}, kFloat32, {Replicate()});
  REQUIRE_THROWS_AS(cat({a, b}, 0), Error);
  REQUIRE_THROWS_WITH(cat({a, b}, 0), Contains("[cat]") && Contains("4"));
  REQUIRE_THROWS_WITH(stack({a, b}, 0), Contains("[stack]"));
  REQUIRE_THROWS_WITH(reshape(a, Shape{5 * w}), Contains("[reshape]") &&
                                                    Contains(std::to_string(5 * w)));
  REQUIRE_THROWS_WITH(view(a, Shape{-1, 7}), Contains("[view]"));
  REQUIRE_THROWS_WITH(transpose(a, 0, 2), Contains("[transpose]") && Contains("2"));
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: DTensor op with inputs on different meshes") {
  const int64_t w = world_size();
  const DeviceMesh m1 = init_device_mesh(kCPU, {w});
  const DeviceMesh m2 = init_device_mesh(kCPU, {1, w});
  const DTensor a = make(m1, {w, 3}, kFloat32, {Shard(0)});
  const DTensor b = make(m2, {w, 3}, kFloat32, {Replicate(), Shard(0)});
  REQUIRE_THROWS_AS(cat({a, b}, 1), Error);
  REQUIRE_THROWS_WITH(cat({a, b}, 1), Contains("[cat]") && Contains("mesh"));
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: in-place op that would change placements") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const DTensor self = make(mesh, {2 * w + 1, 3}, kFloat32, {Partial(ReduceOp::kMax)});
  const DTensor other = make(mesh, {2 * w + 1, 3}, kFloat32, {Shard(0)});
  REQUIRE_THROWS_AS(add_(self, other), Error);
  REQUIRE_THROWS_WITH(add_(self, other), Contains("[add_]") && Contains("self") &&
                                             Contains("P(max)"));
  // Nothing was written: self still holds its value.
  REQUIRE(self.placements() == Placements{Partial(ReduceOp::kMax)});
  REQUIRE(equal(self.full_tensor(), zeros({2 * w + 1, 3})));
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: in-place op with a dtype the result cannot take") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  const DTensor self = make(mesh, {w, 3}, kInt32, {Shard(0)});
  const DTensor other = make(mesh, {w, 3}, kFloat32, {Shard(0)});
  REQUIRE_THROWS_AS(add_(self, other), Error);
  REQUIRE_THROWS_WITH(add_(self, other),
                      Contains("add_") && Contains("int32") && Contains("float32"));
  world_communicator()->barrier()->wait();
}

TEST_CASE("bad input: in-place op into an expanded (stride-0) local tensor") {
  // PyTorch refuses: each element would be written several times.
  Tensor e = zeros({1, 3}).expand({4, 3});
  REQUIRE_THROWS_WITH(add_(e, ones({4, 3})),
                      Contains("[add_] unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location"));
  REQUIRE_THROWS_WITH(mul_(e, Scalar(2.0)), Contains("[mul_] unsupported operation"));
  REQUIRE_THROWS_WITH(fill_(e, Scalar(1.0)), Contains("unsupported operation"));
  world_communicator()->barrier()->wait();
}

TEST_CASE("numerics: amax/amin of a sharded DTensor propagate NaN from any shard") {
  const int64_t w = world_size();
  const DeviceMesh mesh = init_device_mesh(kCPU, {w});
  for (int64_t at : {int64_t{0}, 2 * w}) {  // NaN in the first or the last rank's shard
    std::vector<float> v(static_cast<size_t>(2 * w + 1));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    v[static_cast<size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
    const DTensor d = distribute_tensor(from_vector(v, {2 * w + 1}), mesh, {Shard(0)});
    CHECK(std::isnan(amax(d).full_tensor().item<float>()));
    CHECK(std::isnan(amin(d).full_tensor().item<float>()));
  }
  world_communicator()->barrier()->wait();
}

}  // namespace
}  // namespace dtensor
