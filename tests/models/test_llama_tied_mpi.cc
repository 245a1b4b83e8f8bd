// A Llama with tie_word_embeddings and Hugging Face files (issue 43, R1 D) under mpirun (1, 2,
// 4 ranks), at TP = world size: transformers' save_pretrained of a tied Llama
// (tests/data/tiny_llama_tied, no lm_head.weight in the file) loads strictly and gives
// transformers' logits; so does a file that also holds lm_head.weight (as some tied checkpoints
// do), and one holding the table as lm_head.weight only; save_hf writes the table once, under
// model.embed_tokens.weight, and that save loads back strictly to the same logits. The save is
// left in llama_tied_save_np<w>/ for the ctest hf_tied_save_transformers, which loads it with
// transformers itself (where a Python with transformers is configured).
#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/checkpoint/hf.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/models/llama.h"
#include "dtensor/models/llama_plan.h"
#include "dtensor/tensor/compare.h"
#include "tests/models/llama_test_util.h"

namespace dt = dtensor;
namespace ck = dtensor::checkpoint;
namespace models = dtensor::models;

namespace {

const std::string kTied = DTENSOR_TINY_LLAMA_TIED_DIR;

// float32 against transformers (eager attention, other summation orders); as test_llama_mpi.
constexpr double kLogitTol = 1e-5;

const std::map<std::string, dt::Tensor>& reference() {
  static const auto ref = llama_test::read_safetensors(kTied + "/reference.safetensors");
  return ref;
}

// The tied tiny Llama at TP = world size, its weights read strictly from `dir`.
std::unique_ptr<models::Llama> load_tied(const std::string& dir) {
  auto model = std::make_unique<models::Llama>(models::LlamaConfig::from_hf_dir(kTied));
  models::parallelize_llama(*model, dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"tp"}));
  const ck::HfLoadResult r = ck::load_hf(*model, dir);  // strict
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  return model;
}

dt::Tensor logits_of(models::Llama& model) {
  dt::autograd::NoGradGuard no_grad;
  return model(dt::nn::local_dtensor(reference().at("input_ids"))).full_tensor();
}

// A fresh directory (rank 0 clears it; every rank returns after).
std::string fresh_dir(const std::string& name) {
  const std::string dir = name + "_np" + std::to_string(dt::world_size());
  if (dt::world_rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  dt::world_communicator()->barrier()->wait();
  return dir;
}

}  // namespace

TEST_CASE("A tied Llama loads transformers' tied save strictly and gives its logits",
          "[llama][tied]") {
  models::Llama plain(models::LlamaConfig::from_hf_dir(kTied));
  REQUIRE(plain.config().tie_word_embeddings);
  CHECK(plain.lm_head() == nullptr);
  CHECK(plain.parameter_aliases() == std::vector<std::pair<std::string, std::string>>{
                                         {"lm_head.weight", "model.embed_tokens.weight"}});

  auto model = load_tied(kTied);
  const dt::Tensor logits = logits_of(*model);
  const double d = dt::max_abs_diff(logits, reference().at("logits"));
  INFO("logits max abs diff " << d);
  CHECK(d < kLogitTol);

  // The same weights written with the table under both names, and under lm_head.weight only
  // (save_hf of named DTensors writes exactly those names): each loads strictly, bit-equal.
  const dt::DTensor& table = model->get_parameter("model.embed_tokens.weight");
  for (const bool canonical_too : {true, false}) {
    INFO("model.embed_tokens.weight in the file too: " << canonical_too);
    ck::StateDict state;
    for (const auto& [name, p] : model->named_parameters()) {
      if (name != "model.embed_tokens.weight" || canonical_too) state.emplace_back(name, p);
    }
    state.emplace_back("lm_head.weight", table);
    const std::string dir = fresh_dir(canonical_too ? "llama_tied_both" : "llama_tied_alias");
    ck::save_hf(state, dir);
    auto again = load_tied(dir);
    CHECK(dt::equal(logits_of(*again), logits));
  }
}

TEST_CASE("save_hf of a tied Llama writes the table once and loads back strictly",
          "[llama][tied]") {
  auto model = load_tied(kTied);
  const dt::Tensor logits = logits_of(*model);
  const std::string dir = fresh_dir("llama_tied_save");
  ck::save_hf(*model, dir, {.config_json = ck::read_hf_config(kTied)});
  auto again = load_tied(dir);
  CHECK(dt::equal(logits_of(*again), logits));
  // As save_pretrained's: no lm_head.weight entry, one entry per (canonical) parameter.
  const auto header = llama_test::read_safetensors(dir + "/model.safetensors");
  CHECK(header.contains("model.embed_tokens.weight"));
  CHECK_FALSE(header.contains("lm_head.weight"));
  CHECK(header.size() == model->named_parameters().size());
}
