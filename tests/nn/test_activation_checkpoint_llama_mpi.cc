// Activation checkpointing of models::Llama's decoder layers (mpirun at 2 and 4 ranks): the
// layers read the per-call step (positions, mask) the model prepares in forward, and the
// recompute in backward reads it again; the gradients equal the plain run's bit for bit,
// unparallelized, tensor-parallel (with sequence parallel) and TP x FSDP (parallelize_llama).
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/models/llama.h"
#include "dtensor/models/llama_plan.h"
#include "dtensor/nn/activation_checkpoint.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/llama_config_test_util.h"
#include "tests/nn/test_activation_checkpoint_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace models = dtensor::models;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Tensor;

namespace {

// Rows [row0, row0 + rows) of a fixed [4, 8] batch of token ids.
Tensor tokens(int64_t row0, int64_t rows) {
  std::vector<int64_t> v(4 * 8);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 11 + 5) % 50);
  return dt::from_vector<int64_t>(v, {4, 8}).narrow(0, row0, rows).contiguous();
}

// The HF loss's forward and backward: the loss and the gradients.
std::vector<Tensor> step(models::Llama& model, const Tensor& ids) {
  model.zero_grad();
  return st::backward_and_grads(
      models::causal_lm_loss(model(nn::local_dtensor(ids)), nn::local_dtensor(ids)), model);
}

}  // namespace

TEST_CASE("checkpointed Llama decoder layers: gradients bit for bit", "[checkpoint][llama]") {
  const int64_t w = dt::world_size();
  const int layout = GENERATE(0, 1, 2);  // unparallelized; TP (sequence parallel); dp x tp FSDP
  INFO("layout " << layout);
  dt::manual_seed(13);
  models::Llama model(llama_test::small_config(3));
  Tensor ids = tokens(0, 2);
  if (layout == 1) {
    models::LlamaParallelOptions options;
    options.sequence_parallel = true;  // 8 positions: even shards at 2 and 4 ranks
    models::parallelize_llama(model, dt::init_device_mesh(dt::kCPU, {w}, {"tp"}), options);
  } else if (layout == 2) {
    const int64_t tp = w >= 4 ? 2 : 1;
    const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w / tp, tp}, {"dp", "tp"});
    models::parallelize_llama(model, mesh);
    ids = tokens(mesh.get_local_rank(0), 1);
    step(model, ids);  // FSDP records its forward order: both compared steps know it
  }
  const std::vector<Tensor> plain = step(model, ids);
  CHECK(nn::apply_activation_checkpointing(model, "model.layers") ==
        std::vector<std::string>{"model.layers.0", "model.layers.1", "model.layers.2"});
  st::check_bitwise(step(model, ids), plain);
}

namespace {
// A left-padded [2, 8] mask: row 0 whole, row 1 with `pads` pads.
Tensor padding_mask(int64_t pads) {
  std::vector<int64_t> v(2 * 8, 1);
  for (int64_t j = 0; j < pads; ++j) v[static_cast<size_t>(8 + j)] = 0;
  return dt::from_vector<int64_t>(v, {2, 8});
}

// Forwards of several micro-batches (each with its own padding mask, or none), then one
// backward of their summed losses: a checkpointed layer's recompute must read its own forward's
// positions and mask, not the last forward's.
std::vector<Tensor> accumulated(models::Llama& model) {
  model.zero_grad();
  const DTensor a = models::causal_lm_loss(
      model.forward(nn::local_dtensor(tokens(0, 2)), nullptr, nn::local_dtensor(padding_mask(3))),
      nn::local_dtensor(tokens(0, 2)));
  const DTensor b = models::causal_lm_loss(
      model.forward(nn::local_dtensor(tokens(2, 2)), nullptr, nn::local_dtensor(padding_mask(5))),
      nn::local_dtensor(tokens(2, 2)));
  const DTensor c = models::causal_lm_loss(model(nn::local_dtensor(tokens(1, 2))),
                                           nn::local_dtensor(tokens(1, 2)));
  return st::backward_and_grads(dt::add(dt::add(a, b), c), model);
}
}  // namespace

TEST_CASE("checkpointed Llama: other forwards between forward and backward",
          "[checkpoint][llama]") {
  // The reviewer's repro (forward(A, mask) then model(B), one backward) and micro-batches with
  // different padding masks: equal to the plain run bit for bit.
  dt::manual_seed(13);
  models::Llama model(llama_test::small_config(3));
  const std::vector<Tensor> plain = accumulated(model);
  nn::apply_activation_checkpointing(model, "model.layers");
  st::check_bitwise(accumulated(model), plain);
  // A checkpointed attention alone (below the decoder layer) restores its step too.
  nn::remove_checkpoint_wrapper(model.model().layer(0));
  nn::checkpoint_wrapper(model.model().layer(0).self_attn());
  st::check_bitwise(accumulated(model), plain);
}

TEST_CASE("checkpointed Llama: a KV cache forward with grad enabled is refused",
          "[checkpoint][llama]") {
  dt::manual_seed(13);
  models::Llama model(llama_test::small_config(3));
  nn::apply_activation_checkpointing(model, "model.layers");
  models::KVCache cache = model.make_cache(2, 16);
  CHECK_THROWS_WITH(model.forward(nn::local_dtensor(tokens(0, 2)), &cache),
                    Catch::Contains("[Llama] a forward with a KV cache and grad enabled"));
  dt::autograd::NoGradGuard no_grad;
  CHECK(model.forward(nn::local_dtensor(tokens(0, 2)), &cache).size(1) == 8);
}
