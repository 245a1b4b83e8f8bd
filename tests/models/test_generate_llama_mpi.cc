// models::generate on the committed tiny Llama (tests/data/tiny_llama) under mpirun at 1, 2 and
// 4 ranks, tensor parallel over the world (kv heads sharded at 2, replicated at 4): greedy
// tokens equal transformers' generate(do_sample=False, max_new_tokens=8) at every degree; eos
// stops there; a left-padded batch of two prompts gives each prompt's tokens alone; seeded
// sampling gives every rank the same tokens and repeats with the same seed.
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/models/generate.h"
#include "dtensor/models/llama.h"
#include "dtensor/models/llama_plan.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape_ops.h"
#include "tests/models/llama_test_util.h"

namespace dt = dtensor;
namespace models = dtensor::models;

namespace {

const std::map<std::string, dt::Tensor>& reference() {
  static const auto ref =
      llama_test::read_safetensors(llama_test::kTinyLlama + "/reference.safetensors");
  return ref;
}

// The tiny checkpoint, parallelized by parallelize_llama on `mesh` (none: single device).
std::unique_ptr<models::Llama> tiny(const std::optional<dt::DeviceMesh>& mesh) {
  auto model =
      std::make_unique<models::Llama>(models::LlamaConfig::from_hf_dir(llama_test::kTinyLlama));
  const auto weights = llama_test::read_safetensors(llama_test::kTinyLlama + "/model.safetensors");
  for (const auto& [name, p] : model->named_parameters()) {
    INFO(name);
    REQUIRE(weights.count(name) == 1);
    dt::Tensor local = p.to_local();
    local.copy_(weights.at(name));
  }
  if (mesh) models::parallelize_llama(*model, *mesh);
  return model;
}

// Tensor parallel over the world.
std::unique_ptr<models::Llama> tiny_tp() {
  return tiny(dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"tp"}));
}

std::vector<int64_t> values(const dt::Tensor& t) {
  return t.contiguous().to_vector<int64_t>();
}

// FSDP's mesh: dp 2 x tp 2 (FSDP and tensor parallel) at 4 ranks, dp 2 at 2.
dt::DeviceMesh dp_mesh() {
  return dt::world_size() == 4 ? dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"})
                               : dt::init_device_mesh(dt::kCPU, {2}, {"dp"});
}

// Every rank's `t` (one shape everywhere), stacked along a new leading dim.
dt::Tensor from_every_rank(const dt::Tensor& t) {
  const dt::DeviceMesh world = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"w"});
  return dt::DTensor::from_local(t.unsqueeze(0), world, {dt::Shard(0)}).full_tensor();
}

}  // namespace

TEST_CASE("generate: greedy tokens equal transformers' at this tensor-parallel degree",
          "[generate][llama]") {
  auto model = tiny_tp();
  const dt::Tensor prompt = reference().at("greedy.prompt");  // [1, 5]
  const dt::Tensor want = reference().at("greedy.tokens");    // [1, 5 + 8]
  models::GenerateOptions o;
  o.max_new_tokens = 8;
  const dt::Tensor got = models::generate(*model, prompt, o);
  CHECK(values(got) == values(want));

  // The third new token as eos: the row ends at its first occurrence among the new tokens.
  const std::vector<int64_t> all = values(want);
  const size_t P = static_cast<size_t>(prompt.size(1));
  o.eos_token_id = {all[P + 2]};
  size_t first = P;
  while (all[first] != all[P + 2]) ++first;
  const std::vector<int64_t> cut(all.begin(), all.begin() + static_cast<int64_t>(first) + 1);
  CHECK(values(models::generate(*model, prompt, o)) == cut);
}

TEST_CASE("generate: a left-padded batch gives each prompt's tokens alone", "[generate][llama]") {
  auto model = tiny_tp();
  const std::vector<int64_t> ref_ids = values(reference().at("input_ids"));  // [2, 12]
  const std::vector<int64_t> a(ref_ids.begin(), ref_ids.begin() + 6);        // row 0, 6 tokens
  const std::vector<int64_t> b(ref_ids.begin() + 12, ref_ids.begin() + 15);  // row 1, 3 tokens
  models::GenerateOptions o;
  o.max_new_tokens = 6;
  const auto alone = [&](const std::vector<int64_t>& p) {
    const int64_t shape[] = {1, static_cast<int64_t>(p.size())};
    return values(models::generate(*model, dt::from_vector<int64_t>(p, shape), o));
  };
  const std::vector<int64_t> want_a = alone(a), want_b = alone(b);
  // Row 1 left-padded with 3 pads (id 0, masked out).
  std::vector<int64_t> batch = a, mask(12, 1);
  batch.insert(batch.end(), {0, 0, 0});
  batch.insert(batch.end(), b.begin(), b.end());
  std::fill(mask.begin() + 6, mask.begin() + 9, 0);
  const int64_t shape[] = {2, 6};
  o.attention_mask = dt::from_vector<int64_t>(mask, shape);
  const std::vector<int64_t> got =
      values(models::generate(*model, dt::from_vector<int64_t>(batch, shape), o));
  REQUIRE(got.size() == 2 * 12);
  CHECK(std::vector<int64_t>(got.begin(), got.begin() + 12) == want_a);
  CHECK(std::vector<int64_t>(got.begin() + 12 + 3, got.end()) == want_b);
}

TEST_CASE("generate: seeded sampling gives every rank the same tokens", "[generate][llama]") {
  auto model = tiny_tp();
  const dt::Tensor prompt = reference().at("input_ids").narrow(1, 0, 4).contiguous();  // [2, 4]
  models::GenerateOptions o;
  o.max_new_tokens = 10;
  o.do_sample = true;
  o.temperature = 1.5;  // flat enough that sampling departs from greedy
  o.top_k = 40;
  o.top_p = 0.95;
  o.seed = 2024;
  const dt::Tensor got = models::generate(*model, prompt, o);
  CHECK(got.shape() == dt::Shape{2, 14});
  const dt::Tensor every = from_every_rank(got);
  for (int64_t r = 0; r < dt::world_size(); ++r) {
    INFO("rank " << r);
    CHECK(values(every.select(0, r)) == values(got));
  }
  CHECK(values(models::generate(*model, prompt, o)) == values(got));  // the same seed
  models::GenerateOptions greedy;
  greedy.max_new_tokens = 10;
  CHECK(values(models::generate(*model, prompt, greedy)) != values(got));
}

TEST_CASE("generate under FSDP x TP: each dp rank's row equals single-device generation",
          "[generate][llama][fsdp]") {
  const int W = dt::world_size();
  if (W == 1) return;
  // Each dp rank generates its own row of the reference batch.
  auto sharded = tiny(dp_mesh());
  auto single = tiny(std::nullopt);
  const int64_t row = dt::world_rank() / (W / 2);
  const dt::Tensor prompt =
      reference().at("input_ids").narrow(0, row, 1).narrow(1, 0, 6).contiguous();
  models::GenerateOptions o;
  o.max_new_tokens = 6;
  CHECK(values(models::generate(*sharded, prompt, o)) ==
        values(models::generate(*single, prompt, o)));
}

TEST_CASE("generate under FSDP: dp ranks finishing at different steps do not hang",
          "[generate][llama][fsdp]") {
  const int W = dt::world_size();
  if (W == 1) return;
  // transformers' synced_gpus: a dp rank whose rows are all finished keeps running forwards
  // (pad tokens) until every rank is, since FSDP's all-gathers need every dp rank.
  auto sharded = tiny(dp_mesh());
  auto single = tiny(std::nullopt);
  const int64_t row = dt::world_rank() / (W / 2);
  const dt::Tensor both = reference().at("input_ids").narrow(1, 0, 6 - row).contiguous();
  // Different prompts (row 0 six tokens, row 1 five), and an eos that row 0 emits first: row 0's
  // rank finishes after one token, row 1's runs on.
  models::GenerateOptions o;
  o.max_new_tokens = 6;
  const std::vector<int64_t> row0 =
      values(models::generate(*single, both.narrow(0, 0, 1).contiguous(), o));
  const int64_t eos = row0[6];
  const dt::Tensor prompt = both.narrow(0, row, 1).contiguous();
  o.eos_token_id = {eos};
  const std::vector<int64_t> want = values(models::generate(*single, prompt, o));
  CHECK(values(models::generate(*sharded, prompt, o)) == want);
  if (row == 0) CHECK(want.size() == 7u);
  // Different max_new_tokens per rank: the ranks agree on the largest, each returns its own.
  models::GenerateOptions m;
  m.max_new_tokens = row == 0 ? 2 : 5;
  CHECK(values(models::generate(*sharded, prompt, m)) ==
        values(models::generate(*single, prompt, m)));
}
