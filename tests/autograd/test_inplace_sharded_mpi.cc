// In-place DTensor ops on sharded inputs under mpirun (round 5): the saved-tensor rule of
// test_saved_tensor_versions holds through dispatch on every rank alike (a write to a saved
// shard raises on every rank, none hangs), and gradients through in-place chains equal the
// single-device ones. Inputs have world * 3 + 1 rows, so shards are uneven.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "tests/autograd/version_error.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::test::raises_version_error;

namespace {

struct Sharded {
  int64_t n = 3 * dt::world_size() + 1;
  dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {dt::world_size()});
  std::vector<double> values = [this] {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = 0.25 * static_cast<double>(i + 1);
    return v;
  }();
  DTensor leaf = dt::distribute_tensor(dt::from_vector<double>(values, {n}), mesh, {dt::Shard(0)})
                     .requires_grad_();
  DTensor a = dt::mul(leaf, dt::Scalar(1.0));  // a non-leaf: in-place writes allowed
  std::vector<double> grad() const { return leaf.grad().full_tensor().to_vector<double>(); }
};

}  // namespace

TEST_CASE("in-place ops on sharded DTensors follow the saved-tensor rule on every rank") {
  SECTION("sin saves its input: a write to the shards raises at backward") {
    Sharded s;
    const DTensor y = dt::sin(s.a);
    dt::mul_(s.a, dt::Scalar(2.0));
    CHECK(raises_version_error([&] { dt::sum(y).backward(); }));
  }
  SECTION("exp saves its output only: a write to its input leaves the gradient exp(x)") {
    Sharded s;
    const DTensor y = dt::exp(s.a);
    dt::mul_(s.a, dt::Scalar(2.0));
    dt::sum(y).backward();
    const std::vector<double> g = s.grad();
    for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(std::exp(s.values[i])));
  }
  SECTION("a.mul_(a) on shards raises (self read as other, then overwritten)") {
    Sharded s;
    dt::mul_(s.a, s.a);
    CHECK(raises_version_error([&] { dt::sum(s.a).backward(); }));
  }
  SECTION("a.mul_(r) with a replicated r saves r: a write to r raises") {
    Sharded s;
    DTensor r = dt::mul(
        dt::distribute_tensor(dt::from_vector<double>({3.0}, {1}), s.mesh, {dt::Replicate()})
            .requires_grad_(),
        dt::Scalar(1.0));
    dt::mul_(s.a, r);
    dt::add_(r, dt::Scalar(1.0));
    CHECK(raises_version_error([&] { dt::sum(s.a).backward(); }));
  }
  SECTION("a.mul_(2).add_(1), then a * a: gradient 4 (2 x + 1), as on one device") {
    Sharded s;
    dt::add_(dt::mul_(s.a, dt::Scalar(2.0)), dt::Scalar(1.0));
    dt::sum(dt::mul(s.a, s.a)).backward();
    const std::vector<double> g = s.grad();
    for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(4 * (2 * s.values[i] + 1)));
  }
  SECTION("a sharded leaf that requires grad refuses in-place ops; under no_grad they run") {
    Sharded s;
    CHECK_THROWS_WITH(dt::add_(s.leaf, dt::Scalar(1.0)),
                      Catch::Contains("a leaf DTensor that requires grad"));
    const DTensor y = dt::mul(s.leaf, s.leaf);
    {
      dt::autograd::NoGradGuard no_grad;
      dt::add_(s.leaf, dt::Scalar(1.0));
    }
    CHECK(raises_version_error([&] { dt::sum(y).backward(); }));
  }
}
