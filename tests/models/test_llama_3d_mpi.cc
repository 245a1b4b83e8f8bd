// models::Llama under pipeline parallelism (issue 45 items 2 and 5): pipeline_llama's stages
// (embedding on the first, norm + lm_head on the last, cut at decoder layers) run by the
// pipelining schedules, composed with tensor parallelism, FSDP and context parallelism — pp 2 x
// tp 2, pp 2 x dp 2, pp 2 x cp 2 (1F1B, and interleaved with two stages per rank) at 4 ranks;
// pp 2 x dp 2 x tp 2, pp 2 x dp 2 x cp 2 (FSDP over the flattened dp x cp) and pp 2 x cp 2 x
// tp 2 at 8 — train three AdamW steps in float64 like one device: each step's loss and every
// parameter after it. The errors on every rank.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/models/llama.h"
#include "dtensor/models/llama_pipeline.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/pipeline/pipeline_schedule.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "tests/models/llama_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace models = dtensor::models;
namespace pp = dtensor::pipelining;
using Catch::Contains;
using llama_test::max_abs_diff;

namespace {

// GQA, four decoder layers (two stages per rank at pp 2), uneven vocab shards.
models::LlamaConfig config() {
  models::LlamaConfig cfg;
  cfg.vocab_size = 50;
  cfg.hidden_size = 16;
  cfg.intermediate_size = 24;
  cfg.num_hidden_layers = 4;
  cfg.num_attention_heads = 4;
  cfg.num_key_value_heads = 2;
  cfg.head_dim = 4;
  cfg.max_position_embeddings = 16;
  return cfg;
}

struct Case {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  std::string schedule;
  int64_t stages_per_rank;
};

}  // namespace

TEST_CASE("Llama pipelined with dp / tp trains like one device over 3 steps", "[llama][pp]") {
  const int world = dt::world_size();
  if (world != 4 && world != 8) return;
  const Case c = world == 8 ? GENERATE(Case{{2, 2, 2}, {"pp", "dp", "tp"}, "1F1B", 1},
                                       Case{{2, 2, 2}, {"pp", "dp", "cp"}, "1F1B", 1},
                                       Case{{2, 2, 2}, {"pp", "cp", "tp"}, "1F1B", 1})
                            : GENERATE(Case{{2, 2}, {"pp", "tp"}, "1F1B", 1},
                                       Case{{2, 2}, {"pp", "dp"}, "1F1B", 1},
                                       Case{{2, 2}, {"pp", "cp"}, "1F1B", 1},
                                       Case{{2, 2}, {"pp", "tp"}, "Interleaved1F1B", 2});
  INFO(c.names[0] << " x " << c.names[1] << (c.names.size() > 2 ? " x " + c.names[2] : "") << " "
                  << c.schedule);
  const models::LlamaConfig cfg = config();
  const nn::ModuleOptions opts{.dtype = dt::kFloat64};
  dt::manual_seed(21);
  models::Llama ref(cfg, opts);
  dt::manual_seed(21);
  auto model = std::make_shared<models::Llama>(cfg, opts);
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, c.shape, c.names);
  const models::LlamaPipeline pipe =
      models::pipeline_llama(model, mesh, {}, "pp", c.stages_per_rank);
  // The model's loss: under cp the logits are this rank's chunks of the whole rows' labels.
  auto schedule = pp::make_schedule(c.schedule, pipe.stages, /*n_microbatches=*/2,
                                    [&](const dt::DTensor& logits, const dt::DTensor& labels) {
                                      return models::causal_lm_loss(*model, logits, labels);
                                    });
  dt::optim::AdamW opt_ref(ref.parameters(), dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW opt(pipe.parameters(), dt::optim::AdamWOptions(1e-2));
  // This rank's rows: dp splits the batch, each dp rank pipelines its own slice.
  const bool dp = c.names[1] == "dp";
  const int64_t B = 4, S = 8, rows = dp ? B / 2 : B;
  const int64_t row0 = dp ? mesh.get_local_rank("dp") * rows : 0;
  dt::Generator g(6);
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    const dt::Tensor batch =
        dt::randint(0, cfg.vocab_size, {B, S}, dt::TensorOptions(dt::kInt64), &g);
    const dt::Tensor mine = batch.narrow(0, row0, rows).contiguous();
    const dt::DTensor loss_ref =
        models::causal_lm_loss(ref(nn::local_dtensor(batch)), nn::local_dtensor(batch));
    // The pipeline reports the mean over this rank's rows (equal token counts per microbatch).
    const double want =
        dp ? models::causal_lm_loss(ref(nn::local_dtensor(mine)), nn::local_dtensor(mine))
                 .to_local()
                 .item<double>()
           : loss_ref.to_local().item<double>();
    loss_ref.backward();
    const double loss = schedule->step(nn::local_dtensor(mine), nn::local_dtensor(mine));
    CHECK(std::abs(loss - want) < 1e-12);
    opt_ref.step();
    opt.step();
    opt_ref.zero_grad();
    opt.zero_grad();
    int64_t checked = 0;
    for (const auto& stage : pipe.stages) {
      for (const auto& [name, p] : stage->submod().named_parameters()) {
        INFO(name);
        CHECK(max_abs_diff(p.full_tensor(), ref.get_parameter(name).to_local()) < 1e-12);
        ++checked;
      }
    }
    CHECK(checked > 0);
  }
}

TEST_CASE("pipeline_llama refuses what cannot work, on every rank", "[llama][pp][errors]") {
  if (dt::world_size() != 4) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {4}, {"pp"});
  models::LlamaConfig cfg = config();
  cfg.num_hidden_layers = 3;
  CHECK_THROWS_WITH(models::pipeline_llama(std::make_shared<models::Llama>(cfg), mesh),
                    Contains("[pipeline_llama] 3 decoder layers cannot fill 4 stages"));
  cfg = config();
  cfg.tie_word_embeddings = true;
  CHECK_THROWS_WITH(models::pipeline_llama(std::make_shared<models::Llama>(cfg), mesh),
                    Contains("tie_word_embeddings"));
  const dt::DeviceMesh other = dt::init_device_mesh(dt::kCPU, {2, 2}, {"pp", "x"});
  CHECK_THROWS_WITH(models::pipeline_llama(std::make_shared<models::Llama>(config()), other),
                    Contains("expected a dim named 'pp' (pipeline)"));
}
