// A dry run on meta tensors (issue 46 item 2): a Llama-70B-shaped model at 1,024 ranks (dp 128 x
// tp 8) runs a whole training step in one process without allocating it. Run under the fake
// backend (DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=1024, test_dry_run_meta.cmake).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/models/dry_run.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/optim/optimizer.h"
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

// The model's parameter count, as Hugging Face counts Llama-3-70B's (70.6e9).
int64_t parameters(const models::LlamaConfig& c) {
  const int64_t h = c.hidden_size, kv = c.num_key_value_heads * c.head_dim;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t layer = h * q + 2 * h * kv + q * h + 3 * h * c.intermediate_size + 2 * h;
  return 2 * c.vocab_size * h + c.num_hidden_layers * layer + h;
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
    if (name != "step") CHECK(state.to_local().device() == device);
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
  // AdamW: exp_avg and exp_avg_sq per parameter, plus the step count.
  CHECK(r.optimizer_bytes >= 2 * r.parameter_bytes);
  CHECK(r.optimizer_bytes <= 2 * r.parameter_bytes + 64);
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
