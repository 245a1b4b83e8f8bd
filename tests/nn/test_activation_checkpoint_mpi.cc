// Activation checkpointing on DTensors (mpirun at 2 and 4 ranks): checkpointed decoder blocks
// of a tensor-parallel Transformer (with and without sequence parallel), of a TP x FSDP model on
// a dp x tp mesh, of a replicated (DDP) one, and a dropout function on a 2-D mesh give the
// gradients of the plain run bit for bit on every rank; the recompute's collectives are those of
// the blocks' forwards; an error is raised on every rank.
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/parallel/transformer_plan.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/rng/random.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/nn/test_activation_checkpoint_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Shard;
using dt::Tensor;

namespace {

nn::TransformerConfig config() {
  nn::TransformerConfig cfg;
  cfg.vocab_size = 40;
  cfg.dim = 16;
  cfg.n_heads = 4;
  cfg.hidden_dim = 24;
  cfg.n_layers = 3;
  return cfg;
}

// Token ids [rows, kSeq] and targets, the same on every rank. kSeq divides by the tp degree
// (sequence parallel with uneven sequence shards raises a collective mismatch in the plain,
// non-checkpointed forward today: not what this file tests).
constexpr int64_t kSeq = 8;
std::pair<Tensor, Tensor> batch(int64_t rows, int64_t vocab, int salt) {
  std::vector<int64_t> tok(rows * kSeq), tgt(rows * kSeq);
  for (size_t i = 0; i < tok.size(); ++i) {
    tok[i] = static_cast<int64_t>((i * 7 + salt) % vocab);
    tgt[i] = static_cast<int64_t>((i * 5 + 3 * salt + 1) % vocab);
  }
  return {dt::from_vector<int64_t>(tok, {rows, kSeq}),
          dt::from_vector<int64_t>(tgt, {rows * kSeq})};
}

// One forward and backward of the cross-entropy loss: the loss and the gradients.
std::vector<Tensor> step(nn::Module& model, const Tensor& tokens, const Tensor& targets,
                         int64_t vocab) {
  model.zero_grad();
  const int64_t rows[] = {-1, vocab};
  return st::backward_and_grads(
      dt::cross_entropy(dt::reshape(model(nn::local_dtensor(tokens)), rows),
                        nn::local_dtensor(targets)),
      model);
}

}  // namespace

TEST_CASE("checkpointed blocks of a tensor-parallel Transformer: gradients bit for bit",
          "[checkpoint][tp]") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w}, {"tp"});
  const bool sequence_parallel = GENERATE(false, true);
  INFO("sequence_parallel " << sequence_parallel);
  const nn::TransformerConfig cfg = config();
  dt::manual_seed(3);
  nn::Transformer model(cfg, {});
  dt::TransformerPlanOptions plan;
  plan.sequence_parallel = sequence_parallel;
  dt::parallelize_module(model, mesh, dt::transformer_tp_plan(plan));
  const auto [tokens, targets] = batch(3, cfg.vocab_size, 1);
  int64_t plain_total = 0, forward_collectives = 0;
  std::vector<Tensor> plain;
  {
    dt::CommDebugMode comm;
    plain = step(model, tokens, targets, cfg.vocab_size);
    plain_total = comm.total_count();
  }
  {
    // The collectives one block's forward issues (the recompute repeats them in backward).
    dt::autograd::NoGradGuard no_grad;
    const DTensor h = model.get_submodule("tok_embeddings")(nn::local_dtensor(tokens));
    dt::CommDebugMode comm;
    model.get_submodule("layers.0")(h);
    forward_collectives = comm.total_count();
  }
  const std::vector<std::string> wrapped = nn::apply_activation_checkpointing(model, "layers");
  REQUIRE(wrapped.size() == 3);
  dt::CommDebugMode comm;
  st::check_bitwise(step(model, tokens, targets, cfg.vocab_size), plain);
  // Forward and backward: the plain run's collectives and one more forward per block.
  CHECK(comm.total_count() == plain_total + cfg.n_layers * forward_collectives);
}

TEST_CASE("checkpointed blocks under TP x FSDP on a dp x tp mesh: gradients bit for bit",
          "[checkpoint][tp][fsdp]") {
  const int64_t w = dt::world_size();
  const int64_t tp = w >= 4 ? 2 : 1;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w / tp, tp}, {"dp", "tp"});
  const nn::TransformerConfig cfg = config();
  dt::manual_seed(4);
  nn::Transformer model(cfg, {});
  // Checkpointing before the parallel styles (torchtitan's order), on every other layer.
  REQUIRE(nn::apply_activation_checkpointing(model, "layers", 2) ==
          std::vector<std::string>{"layers.1"});
  dt::parallelize_module(model, mesh[{"tp"}], dt::transformer_tp_plan());
  auto dp = dt::fully_shard(model, mesh, {.grouping = {.module_types = {"TransformerBlock"}}});
  // Each dp rank its own rows.
  const auto [all_tokens, all_targets] = batch(2 * (w / tp), cfg.vocab_size, 2);
  const int64_t r = mesh.get_local_rank(0);
  const Tensor tokens = all_tokens.narrow(0, 2 * r, 2).contiguous();
  const Tensor targets = all_targets.narrow(0, 2 * kSeq * r, 2 * kSeq).contiguous();
  // Checkpointing is switched per block between runs on the same model; the first step records
  // FSDP's forward order, so both compared steps run with it known.
  step(model, tokens, targets, cfg.vocab_size);
  SECTION("every other block") {
    const std::vector<Tensor> ckpt = step(model, tokens, targets, cfg.vocab_size);
    nn::remove_checkpoint_wrapper(model.get_submodule("layers.1"));
    st::check_bitwise(ckpt, step(model, tokens, targets, cfg.vocab_size));
  }
  SECTION("every block") {
    nn::remove_checkpoint_wrapper(model.get_submodule("layers.1"));
    const std::vector<Tensor> plain = step(model, tokens, targets, cfg.vocab_size);
    nn::apply_activation_checkpointing(model, "layers");
    st::check_bitwise(step(model, tokens, targets, cfg.vocab_size), plain);
  }
}

TEST_CASE("checkpointed blocks under replicate (DDP buckets): gradients bit for bit",
          "[checkpoint][ddp]") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w}, {"dp"});
  const nn::TransformerConfig cfg = config();
  dt::manual_seed(5);
  nn::Transformer model(cfg, {});
  // Small buckets: several all-reduces, launched from the parameters' gradient hooks, which
  // run in the outer backward as in a plain run.
  auto dp = dt::replicate(model, mesh, {.bucket_cap_bytes = 4096});
  REQUIRE(dp->num_buckets() > 1);
  const auto [all_tokens, all_targets] = batch(w, cfg.vocab_size, 4);
  const int64_t r = mesh.get_local_rank(0);
  const Tensor tokens = all_tokens.narrow(0, r, 1).contiguous();
  const Tensor targets = all_targets.narrow(0, kSeq * r, kSeq).contiguous();
  const std::vector<Tensor> plain = step(model, tokens, targets, cfg.vocab_size);
  nn::apply_activation_checkpointing(model, "layers");
  st::check_bitwise(step(model, tokens, targets, cfg.vocab_size), plain);
}

TEST_CASE("checkpoint of a dropout function on a 2-D mesh: the recompute draws the same mask",
          "[checkpoint][rng]") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, w / 2});
  const Tensor x = st::det_input({3 * w + 1, 5}, 1, -1.0, 0.2, dt::kFloat64);
  const Tensor r = st::det_input({3 * w + 1, 5}, 2, -1.0, 0.3, dt::kFloat64);
  auto fn = [](const DTensor& v) { return dt::mul(dt::dropout(dt::tanh(v), 0.5), v); };
  auto grad = [&](bool use_checkpoint) {
    dt::manual_seed(21);
    DTensor xd = dt::distribute_tensor(x, mesh, {Shard(0), Shard(1)}, std::nullopt);
    xd.requires_grad_();
    const DTensor y = use_checkpoint ? nn::checkpoint(fn, xd) : fn(xd);
    dt::sum(dt::mul(y, dt::distribute_tensor(r, mesh, {Shard(0), Shard(1)}, std::nullopt)))
        .backward();
    return std::pair<Tensor, uint64_t>{xd.grad().to_local().clone(),
                                       dt::default_generator().offset()};
  };
  const auto [want, want_offset] = grad(false);
  const auto [got, got_offset] = grad(true);
  CHECK(st::same_values(got, want, 0.0));
  CHECK(got_offset == want_offset);
}

TEST_CASE("checkpoint errors are raised on every rank", "[checkpoint]") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = st::det_input({2 * w, 3}, 1, -1.0, 0.2, dt::kFloat64);
  DTensor xd = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  xd.requires_grad_();
  DTensor other = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  other.requires_grad_();
  // fn reads `other`, which requires grad, without taking it as an input.
  const DTensor y = nn::checkpoint([&](const DTensor& v) { return dt::mul(v, other); }, xd);
  CHECK_THROWS_WITH(dt::sum(y).backward(),
                    Catch::Contains("[checkpoint] the checkpointed function reads a tensor"));
}

TEST_CASE("a fully_shard unit nested inside a checkpointed module is refused on every rank",
          "[checkpoint][fsdp]") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const nn::TransformerConfig cfg = config();
  dt::manual_seed(6);
  nn::Transformer model(cfg, {});
  auto dp = dt::fully_shard(model, mesh, {.grouping = {.module_types = {"TransformerBlock"}}});
  nn::checkpoint_wrapper(model);  // the root, around the block units
  const auto [tokens, targets] = batch(2, cfg.vocab_size, 3);
  CHECK_THROWS_WITH(step(model, tokens, targets, cfg.vocab_size),
                    Catch::Contains("through FullyShardGatherBackward") &&
                        Catch::Contains("a fully_shard unit nested inside a checkpointed module"));
}
