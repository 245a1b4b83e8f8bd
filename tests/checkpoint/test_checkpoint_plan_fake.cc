// plan_save and plan_load under the fake backend (issue 46): one process plays rank
// DTENSOR_FAKE_RANK of a fake world of 8 on a (dp 2, tp 4) mesh of meta DTensors, as a dry run
// does, and the dry run's report carries the checkpoint's plan. ctest runs it as rank 0 (whose plan
// is exact) and rank 5 (an upper bound for a tensor on the tp submesh: see plan.h); nothing is
// allocated and no file is touched.
#include <catch2/catch.hpp>
#include <filesystem>

#include "dtensor/checkpoint/plan.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/models/dry_run.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/memory_stats.h"

namespace ck = dtensor::checkpoint;
namespace dt = dtensor;

namespace {

dt::DTensor meta(dt::IntSpan shape, const dt::DeviceMesh& mesh, const dt::Placements& p) {
  const dt::Shape local =
      dt::compute_local_shape_and_offset(shape, mesh.shape(), mesh.get_coordinate(), p).shape;
  return dt::DTensor::from_local(dt::empty(local, dt::TensorOptions(dt::kFloat32, dt::kMeta)), mesh,
                                 p, false, dt::Shape(shape.begin(), shape.end()));
}

}  // namespace

TEST_CASE("plan_save and plan_load on the fake backend", "[checkpoint][plan][fake]") {
  REQUIRE(dt::fake_backend());
  REQUIRE(dt::world_size() == 8);
  const int rank = dt::world_rank();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 4}, {"dp", "tp"});
  const int64_t tp = rank % 4;
  const ck::StateDict state = {
      {"tp.w", meta({8, 4}, mesh["tp"], {dt::Shard(0)})},               // one copy per dp
      {"mesh.w", meta({8, 4}, mesh, {dt::Replicate(), dt::Shard(0)})},  // dp 0 writes
      {"step", meta({}, dt::self_mesh(), {dt::Replicate()})},           // rank 0 writes
  };
  const int64_t before = dt::memory_stats().current_bytes;
  dt::reset_peak_memory_stats();
  const ck::SavePlan plan = ck::plan_save(state);
  CHECK(dt::memory_stats().peak_bytes - before < (int64_t{1} << 20));
  CHECK(plan.rank == rank);
  CHECK(plan.total_bytes == 2 * 8 * 4 * 4 + 4);
  CHECK(plan.rank_bytes.empty());  // the other ranks are not there
  CHECK(plan.files == -1);
  std::vector<std::string> names;
  for (const ck::WriteItem& w : plan.items) {
    names.push_back(w.fqn);
    CHECK(w.file == (rank == 0 ? "rank-00000.safetensors" : "rank-00005.safetensors"));
    if (w.fqn != "step") {
      CHECK(w.offset == dt::Shape{2 * tp, 0});
      CHECK(w.shape == dt::Shape{2, 4});
      CHECK(w.bytes == 2 * 4 * 4);
    }
  }
  if (rank == 0) {
    CHECK(names == std::vector<std::string>{"tp.w", "mesh.w", "step"});
    CHECK(plan.bytes == 2 * 32 + 4);
  } else {
    CHECK(names == std::vector<std::string>{"tp.w"});  // an upper bound: rank 1 writes it
    CHECK(plan.bytes == 32);
  }

  // A load of the tensors replicated on the world mesh: every rank reads all of each.
  std::map<std::string, ck::TensorInfo> index;
  index["tp.w"] = {{8, 4}, dt::kFloat32, {}};
  for (int64_t r = 0; r < 4; ++r) {
    index["tp.w"].chunks.push_back(
        {"rank-0000" + std::to_string(r) + ".safetensors", "", {2 * r, 0}, {2, 4}});
  }
  const ck::LoadPlan load =
      ck::plan_load({{"tp.w", meta({8, 4}, mesh, {dt::Replicate(), dt::Replicate()})}}, index);
  CHECK(load.items.size() == 4);
  CHECK(load.files == 4);
  CHECK(load.bytes == 8 * 4 * 4);
  CHECK(dt::meta_memory_stats().current_bytes >= 0);
  CHECK_FALSE(std::filesystem::exists("rank-00000.safetensors"));
}

TEST_CASE("the dry run reports the checkpoint's plan", "[checkpoint][plan][fake]") {
  dtensor::models::DryRunOptions o;
  o.config.vocab_size = 64;
  o.config.hidden_size = 32;
  o.config.intermediate_size = 64;
  o.config.num_hidden_layers = 2;
  o.config.num_attention_heads = 4;
  o.config.num_key_value_heads = 4;
  o.config.head_dim = 8;
  o.config.max_position_embeddings = 16;
  o.mesh_shape = {2, 4};
  o.mesh_dim_names = {"dp", "tp"};
  o.seq = 16;
  o.meta = true;
  const dtensor::models::DryRunReport r = dtensor::models::dry_run_llama_step(o);
  // Each rank writes the shards it holds of every parameter and AdamW state (FSDP x TP), but
  // the 5 RMSNorm weights (and their 2 states) are replicated over tp: only tp rank 0 writes
  // their dp shards (16 floats each); only rank 0 writes the step counts (local: the global
  // one and one per parameter, 8 bytes each, what AdamW holds beyond its two states) and
  // AdamW's 8 hyper-parameters (param_groups.*, local float64, not in optimizer_bytes).
  const int64_t norms = 3 * 5 * 16 * 4, groups = 8 * 8;
  const int64_t steps = r.optimizer_bytes - 2 * r.parameter_bytes;
  CHECK(steps == 8 * (1 + 9 * 2 + 3));
  CHECK(r.checkpoint_bytes == r.parameter_bytes + r.optimizer_bytes +
                                  (dt::world_rank() == 0 ? groups : -(steps + norms)));
  CHECK(r.checkpoint_total_bytes > 3 * 4 * (64 * 32 * 2 + 2 * 4 * 32 * 32));
  CHECK(r.checkpoint_files == -1);
  CHECK_THAT(r.table(), Catch::Contains("checkpoint (plan_save): this rank writes"));
}
