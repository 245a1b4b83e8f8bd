// Pipeline checkpoints under mpirun (2 and 4 ranks): a pipeline trained at pp = world is
// gathered by global FQN (gather_full_state_dict), saved with checkpoint::save, and loaded on
// one device and into a pipeline of another pp degree (pp 1 x dp 2 at 2 ranks, pp 2 x dp 2 at 4);
// the values are bit-identical and the next step's loss is the same everywhere.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/pipeline/state_dict.h"
#include "tests/parallel/parallel_test_util.h"
#include "tests/parallel/pipeline/pipeline_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace pp = dtensor::pipelining;
namespace ptu = dtensor::test::pipeline;

TEST_CASE("a pipeline checkpoint loads on one device and at another pp degree",
          "[pipeline][checkpoint]") {
  const int W = dt::world_size();
  const dt::DeviceMesh mesh_a = dt::init_device_mesh(dt::kCPU, {W}, {"pp"});
  const nn::ModulePtr model_a = ptu::make_model(W, dt::kFloat64);
  const auto modules_a = pp::pipeline_split(model_a, W);
  const auto stages_a = ptu::my_stages(modules_a, mesh_a, 1, false);
  auto sched_a = pp::make_schedule("1F1B", stages_a, 4, ptu::loss_fn);
  std::vector<dt::DTensor> params_a;
  for (const auto& st : stages_a) {
    for (const dt::DTensor& prm : st->submod().parameters()) params_a.push_back(prm);
  }
  dt::optim::AdamW opt(params_a, dt::optim::AdamWOptions(1e-2));
  for (int step = 0; step < 2; ++step) {
    const ptu::Batch b = ptu::batch(step);
    opt.zero_grad();
    sched_a->step(nn::local_dtensor(b.tokens), nn::local_dtensor(b.targets));
    opt.step();
  }

  const auto full = pp::gather_full_state_dict(modules_a, stages_a[0]->pp_group());
  const auto names = model_a->named_parameters();
  REQUIRE(full.size() == names.size());
  const std::string dir = "pipeline_checkpoint_np" + std::to_string(W);
  dt::checkpoint::save(full, dir);

  // One device: a fresh model (initial weights) loads the trained ones by FQN.
  const nn::ModulePtr one = ptu::make_model(W, dt::kFloat64);
  dt::checkpoint::load(one->named_parameters(), dir);
  for (size_t i = 0; i < full.size(); ++i) {
    INFO(full[i].first);
    CHECK(full[i].first == names[i].first);
    CHECK(dt::test::max_diff(one->get_parameter(full[i].first).to_local(),
                             full[i].second.to_local()) == 0);
  }

  // Another pp degree: half the pp ranks, the other half of the world as a (replicated) dp dim.
  const int64_t pb = W / 2;
  const dt::DeviceMesh mesh_b = dt::init_device_mesh(dt::kCPU, {pb, 2}, {"pp", "dp"});
  const nn::ModulePtr model_b = ptu::make_model(W, dt::kFloat64);
  const auto modules_b = pp::pipeline_split(model_b, pb);
  const auto stages_b = ptu::my_stages(modules_b, mesh_b, 1, false);
  std::vector<nn::ModulePtr> mine_b;
  for (const auto& st : stages_b) mine_b.push_back(st->module());
  pp::load_full_state_dict(mine_b, one->named_parameters());
  auto sched_b = pp::make_schedule("GPipe", stages_b, 2, ptu::loss_fn);

  const ptu::Batch b = ptu::batch(7);
  const double loss_a = sched_a->step(nn::local_dtensor(b.tokens), nn::local_dtensor(b.targets));
  const double loss_b = sched_b->step(nn::local_dtensor(b.tokens), nn::local_dtensor(b.targets));
  const dt::DTensor loss_one =
      ptu::loss_fn((*one)(nn::local_dtensor(b.tokens)), nn::local_dtensor(b.targets));
  const double want = loss_one.to_local().to(dt::kFloat64).item<double>();
  CHECK(std::abs(loss_a - want) <= 1e-12 * (1 + want));
  CHECK(std::abs(loss_b - want) <= 1e-12 * (1 + want));

  // A state dict that misses a parameter is refused before anything is written.
  auto partial = one->named_parameters();
  const std::string missing = mine_b[0]->named_parameters().front().first;
  std::erase_if(partial, [&](const auto& entry) { return entry.first == missing; });
  CHECK_THROWS_WITH(
      pp::load_full_state_dict(mine_b, partial),
      Catch::Contains("[load_full_state_dict] no value for parameter '" + missing + "'"));
}

// A rank that passes one of its stages twice announces its parameters twice: the gathered state
// dict would hold each twice (or, for two stages sharing a name, one stage's value under both).
// Every rank holds the same list of announced names, so every rank raises, none waits.
TEST_CASE("a parameter announced twice is refused on every rank", "[pipeline][checkpoint]") {
  const int W = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {W}, {"pp"});
  const auto stages = ptu::my_stages(ptu::make_model(W, dt::kFloat64), mesh, 1, false);
  std::vector<std::shared_ptr<pp::PipelineStage>> passed = stages;
  if (dt::world_rank() == 0) passed.push_back(stages[0]);
  CHECK_THROWS_WITH(pp::gather_full_state_dict(passed, stages[0]->pp_group()),
                    Catch::Contains("[gather_full_state_dict] parameter '") &&
                        Catch::Contains("is announced by stage 0 on pp rank 0 and by stage 0 on "
                                        "pp rank 0: names must be unique across the stages"));
}
