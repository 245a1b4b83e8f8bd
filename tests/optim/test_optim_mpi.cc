// clip_grad_value_ on sharded gradients (mpirun at 1, 2 and 4 ranks): each rank clamps its
// shard (uneven included) with no communication, the full gradient equals PyTorch's clamp of the
// single-device one; a Partial gradient is refused on every rank. Adam, AdamW, RMSprop and
// Adagrad on sharded parameters (1-D and 2-D meshes, uneven and empty shards) equal the same
// optimizer on the full tensors, states included.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

namespace {

std::unique_ptr<dt::optim::Optimizer> make_optimizer(const std::string& kind,
                                                     std::vector<DTensor> params) {
  namespace o = dt::optim;
  if (kind == "Adam L2 amsgrad")
    return std::make_unique<o::Adam>(params, o::AdamOptions(0.1).weight_decay(0.1).amsgrad(true));
  if (kind == "Adam decoupled maximize")
    return std::make_unique<o::Adam>(
        params, o::AdamOptions(0.1).weight_decay(0.1).decoupled_weight_decay(true).maximize(true));
  if (kind == "AdamW") return std::make_unique<o::AdamW>(params, o::AdamWOptions(0.1));
  if (kind == "RMSprop centered momentum")
    return std::make_unique<o::RMSprop>(
        params, o::RMSpropOptions(0.01).centered(true).momentum(0.9).weight_decay(0.1));
  if (kind == "RMSprop")
    return std::make_unique<o::RMSprop>(params, o::RMSpropOptions(0.01).alpha(0.5));
  return std::make_unique<o::Adagrad>(
      params,
      o::AdagradOptions(0.1).lr_decay(0.5).initial_accumulator_value(0.2).weight_decay(0.1));
}

}  // namespace

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

// Each rank updates its shard alone (no communication); the full parameters and states equal the
// same optimizer's on the unsharded tensors bit for bit (the updates are elementwise). Layouts:
// Shard(0) uneven (2w + 1 rows), a tensor smaller than the mesh (empty shards), Replicate, and a
// 2-D mesh's [Shard(0), Shard(1)] and [Replicate, Shard(0)]. The last parameter has no gradient
// at step 1 (skipped, its own step count).
TEST_CASE("Adam, AdamW, RMSprop and Adagrad on sharded parameters equal the unsharded update") {
  const std::string kind = GENERATE("Adam L2 amsgrad", "Adam decoupled maximize", "AdamW",
                                    "RMSprop centered momentum", "RMSprop", "Adagrad");
  INFO(kind);
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh1 = dt::init_device_mesh(dt::kCPU, {w});
  const dt::DeviceMesh mesh2 = dt::init_device_mesh(dt::kCPU, {w >= 2 ? 2 : 1, w >= 2 ? w / 2 : 1});
  struct Layout {
    dt::DeviceMesh mesh;
    dt::Placements placements;
    std::vector<int64_t> shape;
  };
  const std::vector<Layout> layouts = {
      {mesh1, {Shard(0)}, {2 * w + 1, 3}},
      {mesh1, {Shard(0)}, {std::max<int64_t>(1, w - 1)}},  // empty shards at 2 and 4 ranks
      {mesh1, {Replicate()}, {4}},
      {mesh2, {Shard(0), Shard(1)}, {5, 3}},
      {mesh2, {Replicate(), Shard(0)}, {3, 2}}};
  std::vector<DTensor> sharded, full;
  for (size_t k = 0; k < layouts.size(); ++k) {
    const Tensor init =
        st::det_input(layouts[k].shape, static_cast<int>(k), -1.25, 0.25, dt::kFloat64);
    sharded.push_back(
        dt::distribute_tensor(init, layouts[k].mesh, layouts[k].placements, std::nullopt));
    full.push_back(dt::local_dtensor(init.clone()));
    sharded.back().requires_grad_();
    full.back().requires_grad_();
  }
  auto opt_sharded = make_optimizer(kind, sharded);
  auto opt_full = make_optimizer(kind, full);
  for (int step = 0; step < 3; ++step) {
    opt_sharded->zero_grad();
    opt_full->zero_grad();
    for (size_t k = 0; k < layouts.size(); ++k) {
      if (step == 1 && k + 1 == layouts.size()) continue;
      const Tensor g = st::det_input(layouts[k].shape, step * 5 + static_cast<int>(k), -2.0, 0.375,
                                     dt::kFloat64);
      sharded[k].set_grad(
          dt::distribute_tensor(g, layouts[k].mesh, layouts[k].placements, std::nullopt));
      full[k].set_grad(dt::local_dtensor(g.clone()));
    }
    dt::CommDebugMode comm;
    opt_sharded->step();
    CHECK(comm.total_count() == 0);
    opt_full->step();
  }
  for (size_t k = 0; k < layouts.size(); ++k) {
    INFO("parameter " << k);
    CHECK(st::same_values(sharded[k].full_tensor(), full[k].to_local(), 0));
    CHECK(sharded[k].to_local().numel() <= full[k].numel());
  }
  // The states: the same names, each with its parameter's spec and the unsharded values.
  const auto sd_sharded = opt_sharded->state_dict();
  const auto sd_full = opt_full->state_dict();
  REQUIRE(sd_sharded.size() == sd_full.size());
  for (size_t e = 0; e < sd_full.size(); ++e) {
    INFO(sd_full[e].first);
    REQUIRE(sd_sharded[e].first == sd_full[e].first);
    const size_t dot = sd_full[e].first.find('.');
    const std::string prefix = sd_full[e].first.substr(0, dot);
    const bool per_param = dot != std::string::npos && prefix != "param_groups" &&
                           sd_full[e].first.substr(dot + 1) != "step";
    if (per_param) {
      const size_t k = std::stoul(prefix);
      CHECK(sd_sharded[e].second.spec() == sharded[k].spec());
      CHECK(st::same_values(sd_sharded[e].second.full_tensor(), sd_full[e].second.to_local(), 0));
    } else {
      CHECK(dt::equal(sd_sharded[e].second.to_local(), sd_full[e].second.to_local()));
    }
  }
}
