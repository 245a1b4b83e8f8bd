// models::Llama under context parallelism (issue 45 item 3) at 4 ranks: parallelize_llama with a
// cp mesh dim (cp 2 x tp 2, cp 4, dp 2 x cp 2 with FSDP over the flattened dims) trains like one
// device — three AdamW steps in float64, the loss and every gradient equal at each step — and
// the tiny checkpoint at cp 2 x tp 2 gives transformers' logits (this rank's chunks), loss and
// gradients. The errors (a length cp cannot cut, a KV cache) on every rank.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/checkpoint/hf.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/models/llama.h"
#include "dtensor/models/llama_plan.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/context/context_parallel.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/llama_config_test_util.h"
#include "tests/models/llama_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace models = dtensor::models;
using Catch::Contains;
using llama_test::max_abs_diff;

namespace {

struct Layout {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  int64_t cp;
  std::string str() const {
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) {
      s += (i ? " x " : "") + names[i] + " " + std::to_string(shape[i]);
    }
    return s;
  }
};

dt::DeviceMesh make_mesh(const Layout& l) {
  return dt::init_device_mesh(dt::kCPU, l.shape, l.names);
}

// GQA (4 q heads, 2 kv heads: tp 2 shards both), uneven vocab and intermediate shards.
models::LlamaConfig small_config() {
  models::LlamaConfig cfg = llama_test::small_config(2);
  cfg.rope_theta = 500.0;
  return cfg;
}

dt::DTensor ids(const dt::Tensor& t) {
  return nn::local_dtensor(t);
}

// This rank's rows of a dp-sharded batch (all rows without a dp dim).
dt::Tensor my_rows(const dt::Tensor& batch, const dt::DeviceMesh& mesh) {
  const auto& names = mesh.dim_names();
  for (size_t d = 0; d < names.size(); ++d) {
    if (names[d] != "dp") continue;
    const int64_t dp = mesh.size(static_cast<int64_t>(d));
    const int64_t rows = batch.size(0) / dp;
    return batch.narrow(0, mesh.get_local_rank(static_cast<int64_t>(d)) * rows, rows).contiguous();
  }
  return batch;
}

}  // namespace

TEST_CASE("Llama in float64: context parallel training equals single device over 3 steps",
          "[llama][cp]") {
  if (dt::world_size() != 4) return;
  const Layout l = GENERATE(Layout{{2, 2}, {"cp", "tp"}, 2}, Layout{{4}, {"cp"}, 4},
                            Layout{{2, 2}, {"dp", "cp"}, 2});
  INFO(l.str());
  const models::LlamaConfig cfg = small_config();
  const nn::ModuleOptions opts{.dtype = dt::kFloat64};
  dt::manual_seed(11);
  models::Llama ref(cfg, opts);
  dt::manual_seed(11);
  models::Llama par(cfg, opts);
  const dt::DeviceMesh mesh = make_mesh(l);
  models::parallelize_llama(par, mesh);
  REQUIRE(par.context_parallel() != nullptr);
  CHECK(par.context_parallel()->cp == l.cp);
  dt::optim::AdamW opt_ref(ref.parameters(), dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW opt_par(par.parameters(), dt::optim::AdamWOptions(1e-2));
  dt::Generator g(5);
  const int64_t B = 2, S = 16;  // S a multiple of 2 * cp for cp 2 and 4
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    const dt::Tensor input =
        dt::randint(0, cfg.vocab_size, {B, S}, dt::TensorOptions(dt::kInt64), &g);
    // The last 3 labels of row 1 ignored (padding): the ignore index crosses the chunks, and
    // rows count different numbers of tokens.
    std::vector<int64_t> v = input.to_vector<int64_t>();
    for (int64_t t = S - 3; t < S; ++t) v[static_cast<size_t>(S + t)] = -100;
    const int64_t shape[] = {B, S};
    const dt::Tensor labels = dt::from_vector(v, shape);
    // Single device sees every row; under dp each dp rank's loss is the mean over its rows and
    // FSDP averages the gradients over dp, so the reference is the mean of the rows' losses.
    const bool dp = l.names[0] == "dp";
    std::vector<dt::DTensor> row_losses;
    for (int64_t b = 0; b < (dp ? B : 1); ++b) {
      const int64_t n = dp ? 1 : B;
      const dt::Tensor in_b = input.narrow(0, b, n).contiguous();
      row_losses.push_back(
          models::causal_lm_loss(ref(ids(in_b)), ids(labels.narrow(0, b, n).contiguous())));
    }
    const dt::DTensor loss_ref =
        dp ? dt::mul(dt::add(row_losses[0], row_losses[1]), dt::Scalar(0.5)) : row_losses[0];
    const dt::Tensor in_par = my_rows(input, mesh), lab_par = my_rows(labels, mesh);
    const dt::DTensor logits = par(ids(in_par));
    CHECK(logits.size(1) == S / l.cp);
    const dt::DTensor loss_par = models::causal_lm_loss(par, logits, ids(lab_par));
    loss_ref.backward();
    loss_par.backward();
    // The whole rows' loss on every cp rank (this dp rank's rows under dp).
    const dt::DTensor& want =
        dp ? row_losses[static_cast<size_t>(mesh.get_local_rank("dp"))] : loss_ref;
    CHECK(std::abs(want.to_local().item<double>() - loss_par.full_tensor().item<double>()) < 1e-13);
    const auto pa = ref.named_parameters(), pb = par.named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      INFO(pa[i].first);
      REQUIRE(pa[i].first == pb[i].first);
      CHECK(max_abs_diff(pa[i].second.grad().to_local(), pb[i].second.grad().full_tensor()) <
            1e-12);
    }
    opt_ref.step();
    opt_par.step();
    opt_ref.zero_grad();
    opt_par.zero_grad();
  }
  for (const auto& [name, p] : ref.named_parameters()) {
    INFO(name);
    CHECK(max_abs_diff(p.to_local(), par.get_parameter(name).full_tensor()) < 1e-12);
  }
}

TEST_CASE("Llama at cp 2 x tp 2 matches transformers on the tiny checkpoint", "[llama][cp]") {
  if (dt::world_size() != 4) return;
  auto model =
      std::make_unique<models::Llama>(models::LlamaConfig::from_hf_dir(llama_test::kTinyLlama));
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"cp", "tp"});
  models::parallelize_llama(*model, mesh);
  const dt::checkpoint::HfLoadResult r = dt::checkpoint::load_hf(*model, llama_test::kTinyLlama);
  CHECK(r.missing_keys.empty());
  const auto ref = llama_test::read_safetensors(llama_test::kTinyLlama + "/reference.safetensors");
  const dt::Tensor input = ref.at("input_ids");  // [2, 12]: 12 = 3 * (2 * cp)
  const dt::DTensor logits = (*model)(ids(input));
  // This rank's chunks of transformers' logits (head-tail order).
  const int64_t cp_rank = mesh.get_local_rank("cp"), mine = input.size(1) / 2;
  const dt::Tensor want =
      dt::head_tail_order(ref.at("logits"), 1, 2).narrow(1, cp_rank * mine, mine);
  CHECK(max_abs_diff(logits.full_tensor(), want.contiguous()) < 1e-5);
  const dt::DTensor loss = models::causal_lm_loss(*model, logits, ids(input));
  CHECK(std::abs(loss.full_tensor().item<float>() - ref.at("loss").item<float>()) < 1e-6);
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(max_abs_diff(p.grad().full_tensor(), ref.at("grad." + name)) < 2e-6);
  }
}

TEST_CASE(
    "Llama under context parallelism: lengths cp cannot cut and the KV cache refused, "
    "on every rank",
    "[llama][cp][errors]") {
  if (dt::world_size() != 4) return;
  models::Llama model(small_config());
  models::parallelize_llama(model, dt::init_device_mesh(dt::kCPU, {2, 2}, {"cp", "tp"}));
  const dt::Tensor six = dt::zeros({1, 6}, dt::TensorOptions(dt::kInt64));
  CHECK_THROWS_WITH(model(ids(six)), Contains("[Llama] sequence length 6 cannot be sharded over "
                                              "cp = 2 ranks") &&
                                         Contains("multiple of 4"));
  const dt::Tensor eight = dt::zeros({1, 8}, dt::TensorOptions(dt::kInt64));
  models::KVCache cache = model.make_cache(1, 16);
  CHECK_THROWS_WITH(model.forward(ids(eight), &cache),
                    Contains("[Llama] context parallel (cp = 2): a KV cache"));
  // The model still runs afterwards.
  CHECK(model(ids(eight)).size(1) == 4);
}

TEST_CASE("context-parallel loss of rows whose every label is ignored: NaN value, zero gradients",
          "[llama][cp]") {
  // PyTorch's mean over no element is NaN and its gradients are zero; a scale of cp / 0 once
  // made every gradient NaN (and FSDP's reduction would have spread them).
  if (dt::world_size() != 4) return;
  dt::manual_seed(5);
  models::Llama model(small_config(), {.dtype = dt::kFloat64});
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"cp", "tp"});
  models::parallelize_llama(model, mesh);
  const dt::Tensor input = dt::arange(0, 16).reshape({2, 8}).to(dt::kInt64);
  const dt::Tensor ignored = dt::full({2, 8}, -100, dt::TensorOptions(dt::kInt64));
  const dt::DTensor loss = models::causal_lm_loss(model, model(ids(input)), ids(ignored));
  CHECK(std::isnan(loss.full_tensor().to(dt::kFloat64).item<double>()));
  loss.backward();
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(max_abs_diff(p.grad().full_tensor(),
                       dt::zeros(p.shape(), dt::TensorOptions(dt::kFloat64))) == 0.0);
  }
}
