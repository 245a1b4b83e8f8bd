// clip_grad_value_ on sharded gradients (mpirun at 1, 2 and 4 ranks): each rank clamps its
// shard (uneven included) with no communication, the full gradient equals PyTorch's clamp of the
// single-device one; a Partial gradient is refused on every rank.
#include <catch2/catch.hpp>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

TEST_CASE("clip_grad_value_ clamps sharded gradients shard by shard") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor c1 = st::det_input({2 * w + 1, 3}, 1, -2.5, 0.5, dt::kFloat64);
  const Tensor c2 = st::det_input({w + 2}, 3, -1.5, 0.375, dt::kFloat64);
  DTensor a = dt::distribute_tensor(dt::zeros({2 * w + 1, 3}, dt::kFloat64), mesh, {Shard(0)},
                                    std::nullopt);
  DTensor b =
      dt::distribute_tensor(dt::zeros({w + 2}, dt::kFloat64), mesh, {Replicate()}, std::nullopt);
  a.requires_grad_();
  b.requires_grad_();
  DTensor none = dt::distribute_tensor(dt::ones({2}, dt::kFloat64), mesh, {Shard(0)}, std::nullopt);
  none.requires_grad_();  // no gradient: skipped
  const DTensor l1 = dt::sum(dt::mul(a, dt::distribute_tensor(c1, mesh, {Shard(0)}, std::nullopt)));
  const DTensor l2 =
      dt::sum(dt::mul(b, dt::distribute_tensor(c2, mesh, {Replicate()}, std::nullopt)));
  dt::add(l1, l2).backward();
  REQUIRE(a.grad().placements() == dt::Placements{Shard(0)});
  {
    dt::CommDebugMode comm;
    dt::optim::clip_grad_value_({a, b, none}, 1.0);
    CHECK(comm.total_count() == 0);
  }
  CHECK(
      st::same_values(a.grad().full_tensor(), dt::clamp(c1, dt::Scalar(-1.0), dt::Scalar(1.0)), 0));
  CHECK(
      st::same_values(b.grad().full_tensor(), dt::clamp(c2, dt::Scalar(-1.0), dt::Scalar(1.0)), 0));
  CHECK_FALSE(none.grad().defined());

  // A gradient left Partial (a Partial leaf's: gradients are laid out like their leaf) is
  // refused, on every rank.
  DTensor p = DTensor::from_local(dt::zeros({4}, dt::kFloat64), mesh, {dt::Partial()});
  p.requires_grad_();
  dt::sum(p).backward();
  REQUIRE(p.grad().spec().has_partial());
  CHECK_THROWS_WITH(dt::optim::clip_grad_value_({p}, 1.0),
                    Catch::Contains("[clip_grad_value_] the gradient of parameter 0 has Partial"));
  // Refused before anything is clamped: a gradient before the Partial one keeps its values.
  DTensor q = DTensor::from_local(dt::full({2}, 10.0, dt::kFloat64), mesh, {dt::Replicate()});
  q.requires_grad_();
  dt::sum(dt::mul(q, q)).backward();  // grad 2q = 20
  CHECK_THROWS_WITH(dt::optim::clip_grad_value_({q, p}, 1.0),
                    Catch::Contains("[clip_grad_value_] the gradient of parameter 1 has Partial"));
  CHECK(q.grad().to_local().to_vector<double>() == std::vector<double>{20.0, 20.0});
}
