// A dry run on meta tensors (issue 46 item 2): a Llama-70B-shaped model at 1,024 ranks (dp 128 x
// tp 8, and the 4-D pp 4 x dp 8 x cp 4 x tp 8) runs a whole training step in one process without
// allocating it. Run under the fake backend (DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=1024
// DTENSOR_FAKE_RANK=37, test_dry_run_meta.cmake).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/models/dry_run.h"
#include "dtensor/models/llama_pipeline.h"
#include "dtensor/nn/layers.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/pipeline/pipeline_schedule.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/memory_stats.h"

namespace dt = dtensor;
namespace models = dtensor::models;

namespace {

models::DryRunOptions llama_70b() {
  models::DryRunOptions o;
  models::LlamaConfig& c = o.config;
  c.vocab_size = 128256;
  c.hidden_size = 8192;
  c.intermediate_size = 28672;
  c.num_hidden_layers = 80;
  c.num_attention_heads = 64;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 128;
  o.mesh_shape = {128, 8};
  o.mesh_dim_names = {"dp", "tp"};
  o.batch = 1;
  o.seq = 128;
  o.meta = true;
  return o;
}

// One decoder layer's parameters (attention, MLP, two norms).
int64_t layer_parameters(const models::LlamaConfig& c) {
  const int64_t h = c.hidden_size, kv = c.num_key_value_heads * c.head_dim;
  const int64_t q = c.num_attention_heads * c.head_dim;
  return h * q + 2 * h * kv + q * h + 3 * h * c.intermediate_size + 2 * h;
}

// The model's parameter count, as Hugging Face counts Llama-3-70B's (70.6e9).
int64_t parameters(const models::LlamaConfig& c) {
  return 2 * c.vocab_size * c.hidden_size + c.num_hidden_layers * layer_parameters(c) +
         c.hidden_size;
}

// One training step of x @ w on a dp x tp mesh (x Shard(0) on dp, w Shard(1) on tp), tensors
// on `device`; returns CommDebugMode's summary and checks the results' devices and shapes.
std::string mm_step(dt::Device device, const dt::DeviceMesh& mesh) {
  const dt::TensorOptions opts(dt::DType::kFloat32, device);
  const dt::DTensor x =
      dt::distribute_tensor(dt::ones({256, 64}, opts), mesh, {dt::Shard(0), dt::Replicate()});
  dt::DTensor w =
      dt::distribute_tensor(dt::ones({64, 32}, opts), mesh, {dt::Replicate(), dt::Shard(1)});
  w.requires_grad_();
  dt::optim::AdamW adam({w});
  dt::CommDebugMode comm;
  const dt::DTensor y = dt::matmul(x, w);
  // A redistribute of the whole result (all-gathers on both dims), then the loss.
  const dt::DTensor loss = dt::sum(y.redistribute({dt::Replicate(), dt::Replicate()}));
  loss.backward();
  adam.step();
  CHECK(y.to_local().device() == device);
  CHECK(y.to_local().sizes() == dt::Shape{256 / mesh.size(0), 32 / mesh.size(1)});
  CHECK(w.grad().to_local().device() == device);
  CHECK(w.grad().to_local().sizes() == w.to_local().sizes());
  CHECK(w.grad().placements() == w.placements());
  for (const auto& [name, state] : adam.state_dict()) {
    if (!name.ends_with("step") && !name.starts_with("param_groups."))
      CHECK(state.to_local().device() == device);
  }
  return comm.str();
}

}  // namespace

TEST_CASE("meta DTensors: ops, redistribute, autograd and AdamW count what data would move",
          "[meta]") {
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {128, 8}, {"dp", "tp"});
  const std::string real = mm_step(dt::Device(), mesh);
  const dt::MemoryStats before = dt::memory_stats();
  const std::string meta = mm_step(dt::Device(dt::kMeta), mesh);
  CHECK(dt::memory_stats().current_bytes == before.current_bytes);
  CHECK(meta == real);
  CHECK_FALSE(real.empty());
  // A value-dependent shape cannot be known without the values.
  const dt::TensorOptions m(dt::DType::kFloat32, dt::Device(dt::kMeta));
  const dt::DTensor x =
      dt::distribute_tensor(dt::ones({8}, m), mesh, {dt::Replicate(), dt::Replicate()});
  const dt::DTensor mask = dt::distribute_tensor(
      dt::ones({8}, dt::TensorOptions(dt::DType::kBool, dt::Device(dt::kMeta))), mesh,
      {dt::Replicate(), dt::Replicate()});
  CHECK_THROWS_WITH(dt::masked_select(x, mask), Catch::Contains("[meta]"));
  CHECK_THROWS_WITH(dt::sum(x).to_local().item<float>(), Catch::Contains("[meta]"));
}

TEST_CASE("meta dry run: a 70B-shaped Llama at 1,024 ranks, without its memory", "[meta]") {
  const models::DryRunOptions o = llama_70b();
  const dt::MemoryStats before = dt::memory_stats();
  dt::reset_peak_memory_stats();
  const models::DryRunReport r = models::dry_run_llama_step(o);
  const dt::MemoryStats after = dt::memory_stats();
  std::printf("%s", r.table().c_str());
  CHECK(r.meta);
  CHECK(r.world_size == 1024);
  // Parameters: float32, sharded 1,024 ways but the norms (replicated over tp); within 1%.
  const double expected = static_cast<double>(parameters(o.config)) * 4 / 1024;
  CHECK(parameters(o.config) > 70'000'000'000);
  CHECK(static_cast<double>(r.parameter_bytes) == Approx(expected).epsilon(0.01));
  CHECK(r.gradient_bytes == r.parameter_bytes);
  // AdamW: exp_avg and exp_avg_sq per parameter, plus the step counts (one int64 per
  // parameter tensor, 9 a layer and 3 outside, and the global one).
  CHECK(r.optimizer_bytes >= 2 * r.parameter_bytes);
  CHECK(r.optimizer_bytes <= 2 * r.parameter_bytes + 8 * (9 * o.config.num_hidden_layers + 4));
  // Activations and gathered parameters would take memory; none of it is allocated.
  CHECK(r.activation_bytes > 0);
  CHECK(r.peak_bytes > r.parameter_bytes);
  CHECK(after.current_bytes == before.current_bytes);
  CHECK(after.peak_bytes - before.current_bytes < (int64_t{64} << 20));
  // FSDP on dp, tensor parallelism on tp.
  REQUIRE(r.per_dim.contains("mesh dim 0 (dp)"));
  REQUIRE(r.per_dim.contains("mesh dim 1 (tp)"));
  CHECK(r.per_dim.at("mesh dim 0 (dp)").contains("all_gather"));
  CHECK(r.per_dim.at("mesh dim 0 (dp)").contains("reduce_scatter"));
  CHECK(r.per_dim.at("mesh dim 1 (tp)").contains("all_reduce"));
}

TEST_CASE("meta dry run: the 4-D layout pp 4 x dp 8 x cp 4 x tp 8 of a 70B-shaped Llama",
          "[meta][pp][cp]") {
  models::DryRunOptions o = llama_70b();
  o.mesh_shape = {4, 8, 4, 8};
  o.mesh_dim_names = {"pp", "dp", "cp", "tp"};
  o.seq = 1024;
  o.config.max_position_embeddings = 1024;
  o.batch = 8;  // 1F1B over 2 x pp = 8 microbatches of one row
  const dt::MemoryStats before = dt::memory_stats();
  const models::DryRunReport r = models::dry_run_llama_step(o);
  std::printf("%s", r.table().c_str());
  CHECK(r.schedule == "1F1B");
  CHECK(r.microbatches == 8);
  CHECK(dt::memory_stats().current_bytes - before.current_bytes < (int64_t{1} << 20));
  // Rank 37 is pp rank 0: the first stage, embed_tokens and layers [0, 20), sharded over
  // dp x cp x tp = 256 ranks (within 1%: the norms are replicated over tp).
  const models::LlamaConfig& c = o.config;
  const double stage = static_cast<double>(c.vocab_size * c.hidden_size + 20 * layer_parameters(c));
  CHECK(static_cast<double>(r.parameter_bytes) == Approx(stage * 4 / 256).epsilon(0.01));
  CHECK(r.gradient_bytes == r.parameter_bytes);
  // pp: per microbatch one activation [1, seq / cp, hidden] sent, its gradient received, each
  // after a header of a few hundred bytes.
  const int64_t activation = int64_t{1} * (1024 / 4) * c.hidden_size * 4;
  REQUIRE(r.per_dim.contains("mesh dim 0 (pp)"));
  const auto& pp = r.per_dim.at("mesh dim 0 (pp)");
  REQUIRE(pp.contains("send"));
  REQUIRE(pp.contains("recv"));
  CHECK(pp.at("send").count == 2 * 8);
  CHECK(pp.at("send").bytes >= 8 * activation);
  CHECK(pp.at("send").bytes < 8 * (activation + 1024));
  CHECK(pp.at("recv") == pp.at("send"));
  // cp: per layer and microbatch, the k and v blocks [1, kv heads / tp, seq / cp, head_dim]
  // take cp - 1 hops forward and again in backward, and the dk / dv accumulators cp hops.
  const int64_t block = int64_t{1} * (8 / 8) * (1024 / 4) * 128 * 4;
  const int64_t hops = 2 * (4 - 1) * 2 + 2 * 4;
  REQUIRE(r.per_dim.contains("mesh dim 2 (cp)"));
  const auto& cp = r.per_dim.at("mesh dim 2 (cp)");
  CHECK(cp.at("send").count == 20 * 8 * hops);
  CHECK(cp.at("send").bytes == 20 * 8 * hops * block);
  CHECK(cp.at("recv") == cp.at("send"));
  // FSDP over dp x cp (one flattened dim) and tensor parallelism on tp. The stage's gradients
  // are reduced once per step, in its last microbatch's backward: one reduce-scatter per unit
  // (20 decoder layers and the stage's root), not 8 x 21.
  REQUIRE(r.per_dim.contains("mesh dim 0 (dp_cp)"));
  REQUIRE(r.per_dim.at("mesh dim 0 (dp_cp)").contains("reduce_scatter"));
  CHECK(r.per_dim.at("mesh dim 0 (dp_cp)").at("reduce_scatter").count == 21);
  // The rank holds only its stage: at the step's start its parameters, their AdamW states and
  // the step's leftovers, not the other stages' layers (the whole model: 140,184 MiB before).
  const int64_t at_start = r.peak_bytes - r.activation_bytes;
  // (AdamW's step count is a CPU tensor, outside the meta figures.)
  CHECK(at_start >= 3 * r.parameter_bytes);
  CHECK(at_start < r.parameter_bytes + r.optimizer_bytes + (int64_t{64} << 20));
  REQUIRE(r.per_dim.contains("mesh dim 3 (tp)"));
  CHECK(r.per_dim.at("mesh dim 3 (tp)").contains("all_reduce"));
}

TEST_CASE("fake backend: a pipeline stage that expects no input is refused by name", "[pp]") {
  // Rank 37 is pp rank 1 here: the last of two stages, which receives the activations. No peer
  // sends their shape on the fake backend, so a stage without an example_input cannot run;
  // with one it does.
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {512, 2}, {"dp", "pp"});
  REQUIRE(mesh.get_coordinate()[1] == 1);
  const dt::DTensor target = dt::nn::local_dtensor(dt::ones({4, 8}));
  const auto loss = [](const dt::DTensor& out, const dt::DTensor& y) {
    return dt::mse_loss(out, y);
  };
  const auto step = [&](const dt::DTensor& example) {
    auto stage = std::make_shared<dt::pipelining::PipelineStage>(
        std::make_shared<dt::nn::Linear>(8, 8), 1, 2, mesh, "pp", example);
    auto schedule = dt::pipelining::make_schedule("GPipe", {stage}, 2, loss);
    return schedule->step(dt::DTensor(), target);
  };
  CHECK_THROWS_WITH(step(dt::DTensor()),
                    Catch::Contains("[ScheduleGPipe] the activation of microbatch 0 from stage 0 "
                                    "to stage 1 cannot be received on the fake backend"));
  dt::CommDebugMode comm;
  CHECK_NOTHROW(step(dt::nn::local_dtensor(dt::ones({2, 8}))));
  CHECK(comm.count(dt::CollectiveKind::kRecv) == 2 * 2);  // header and shard, twice
  CHECK(comm.count(dt::CollectiveKind::kSend) == 2 * 2);  // the gradients back
}

TEST_CASE("pipeline_llama keeps only this rank's stages' modules", "[meta][pp]") {
  // Rank 37 on dp 256 x pp 4 is pp rank 1: stage 1 of 4, decoder layers 2 and 3 of 8.
  models::LlamaConfig c;
  c.vocab_size = 512;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 32;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {256, 4}, {"dp", "pp"});
  const dt::nn::ModuleOptions meta{.device = dt::Device(dt::kMeta)};
  const int64_t start = dt::meta_memory_stats().current_bytes;
  auto model = std::make_shared<models::Llama>(c, meta);
  const int64_t whole = dt::meta_memory_stats().current_bytes - start;
  SECTION("released (the default)") {
    const models::LlamaPipeline pipe = models::pipeline_llama(model, mesh);
    std::vector<std::string> names;
    for (const auto& [name, p] : model->named_parameters()) names.push_back(name);
    REQUIRE_FALSE(names.empty());
    for (const std::string& name : names) {
      INFO(name);
      CHECK((name.starts_with("model.layers.2.") || name.starts_with("model.layers.3.")));
    }
    // The stage's FQNs are the model's own, and only its parameters stay allocated (FSDP's
    // shards of them; the meta figures round each storage up to 64 bytes, as the allocator).
    CHECK(pipe.stages.at(0)->submod().named_parameters().size() == names.size());
    int64_t kept = 0;
    for (const dt::DTensor& p : pipe.parameters()) {
      kept += p.to_local().numel() * static_cast<int64_t>(dt::dtype_size(p.dtype()));
    }
    const int64_t held = dt::meta_memory_stats().current_bytes - start;
    CHECK(held >= kept);
    CHECK(held <= kept + 64 * static_cast<int64_t>(names.size()));
    CHECK(held * 256 < whole);
    CHECK_THROWS_WITH(
        (*model)(dt::nn::local_dtensor(dt::zeros({1, 4}, dt::TensorOptions(dt::kInt64)))),
        Catch::Contains("[Llama] this model holds only this rank's pipeline stages"));
    // A second split or tensor-parallel plan of what is left is refused, not undefined.
    CHECK_THROWS_WITH(models::pipeline_llama(model, mesh),
                      Catch::Contains("[pipeline_llama] the model keeps only some pipeline"));
    CHECK_THROWS_WITH(models::parallelize_llama(*model, mesh["dp"]),
                      Catch::Contains("[parallelize_llama] the model keeps only some pipeline"));
  }
  SECTION("kept (release_unused = false)") {
    const models::LlamaPipeline pipe = models::pipeline_llama(model, mesh, {}, "pp", 1, false);
    CHECK(model->named_parameters().size() == 8 * 9 + 3);
    CHECK(model->named_parameters().size() > pipe.stages.at(0)->submod().named_parameters().size());
  }
}
