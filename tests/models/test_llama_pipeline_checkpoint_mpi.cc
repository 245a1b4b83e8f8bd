// A checkpoint of models::pipeline_llama's stages at pp 2 (issue 45). pipeline_llama releases the
// modules of the other ranks' stages, so no rank can name the whole model: the stages' names,
// dtypes and shapes travel with the values (pipelining::gather_full_state_dict of this rank's
// stages). After an AdamW step through the pipeline, the gathered state dict holds every FQN of
// the Llama exactly once, checkpoint::save writes it, and a fresh Llama on one device
// (pp 1) loads it with the same parameters and the same next-step loss as the pipeline.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/models/llama.h"
#include "dtensor/models/llama_pipeline.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/pipeline/pipeline_schedule.h"
#include "dtensor/parallel/pipeline/state_dict.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/llama_config_test_util.h"
#include "tests/models/llama_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace models = dtensor::models;
namespace pp = dtensor::pipelining;
using llama_test::max_abs_diff;

TEST_CASE("a checkpoint of pipeline_llama's stages holds every name once and loads at pp 1",
          "[llama][pp][checkpoint]") {
  if (dt::world_size() != 2) return;
  const nn::ModuleOptions opts{.dtype = dt::kFloat64};
  dt::manual_seed(21);
  auto model = std::make_shared<models::Llama>(llama_test::small_config(4), opts);
  const std::vector<std::string> names = [&] {
    std::vector<std::string> out;
    for (const auto& [name, p] : model->named_parameters()) out.push_back(name);
    return out;
  }();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2}, {"pp"});
  const models::LlamaPipeline pipe = models::pipeline_llama(model, mesh);
  REQUIRE(model->named_parameters().size() < names.size());  // the others' modules released
  auto loss = [&](const dt::DTensor& logits, const dt::DTensor& labels) {
    return models::causal_lm_loss(*model, logits, labels);
  };
  auto schedule = pp::make_schedule("1F1B", pipe.stages, 2, loss);
  dt::optim::AdamW opt(pipe.parameters(), dt::optim::AdamWOptions(1e-2));
  dt::Generator g(6);
  const auto ids = [&] {
    return nn::local_dtensor(dt::randint(0, 50, {4, 8}, dt::TensorOptions(dt::kInt64), &g));
  };
  const dt::DTensor first = ids();
  schedule->step(first, first);
  opt.step();
  opt.zero_grad();

  const auto full = pp::gather_full_state_dict(pipe.stages, pipe.stages[0]->pp_group());
  std::map<std::string, int> seen;
  for (const auto& [name, value] : full) ++seen[name];
  CHECK(seen.size() == names.size());
  for (const std::string& name : names) {
    INFO(name);
    CHECK(seen[name] == 1);
  }
  // This rank's own parameters are in it with their trained values.
  for (const auto& st : pipe.stages) {
    for (const auto& [name, p] : st->submod().named_parameters()) {
      const auto it = std::find_if(full.begin(), full.end(),
                                   [&](const auto& entry) { return entry.first == name; });
      REQUIRE(it != full.end());
      CHECK(max_abs_diff(it->second.to_local(), p.full_tensor()) == 0);
    }
  }
  // Under the test's working directory (the build tree); removed at the end, and before the
  // save in case an interrupted run left it (save refuses a directory without its index).
  const std::string dir = "llama_pipeline_checkpoint_np2";
  const dt::CommunicatorPtr world = dt::world_communicator();
  if (dt::world_rank() == 0) std::filesystem::remove_all(dir);
  world->barrier()->wait();
  dt::checkpoint::save(full, dir);

  // pp 1: a fresh Llama (other initial weights) on one device loads it.
  dt::manual_seed(99);
  models::Llama one(llama_test::small_config(4), opts);
  dt::checkpoint::load(one.named_parameters(), dir);
  const dt::DTensor next = ids();
  const double want =
      models::causal_lm_loss(one(next), next).to_local().to(dt::kFloat64).item<double>();
  const double got = schedule->step(next, next);
  CHECK(std::abs(got - want) < 1e-12);
  world->barrier()->wait();  // every rank has read it
  if (dt::world_rank() == 0) std::filesystem::remove_all(dir);
}
