// Helpers shared by the pipeline suites: a transformer-style chain with nn::Transformer's names,
// its loss, its tensor-parallel plan per stage, the batches, and this rank's stages.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/pipeline/pipeline_schedule.h"
#include "dtensor/parallel/pipeline/split.h"
#include "dtensor/parallel/transformer_plan.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::test::pipeline {

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace pp = dtensor::pipelining;

constexpr int64_t kVocab = 32, kDim = 16, kBatch = 8, kSeq = 6;

// tok_embeddings, layers.0 .. layers.{n-1} (TransformerBlocks), norm, output: n + 3 units, with
// nn::Transformer's names (so transformer_tp_plan applies).
inline nn::ModulePtr make_model(int64_t n_layers, dt::DType dtype) {
  dt::manual_seed(11);
  nn::ModuleOptions o;
  o.dtype = dtype;
  nn::TransformerConfig cfg;
  cfg.vocab_size = kVocab;
  cfg.dim = kDim;
  cfg.n_heads = 2;
  cfg.n_layers = n_layers;
  auto root = std::make_shared<nn::ModuleList>();
  root->register_module("tok_embeddings", std::make_shared<nn::Embedding>(kVocab, kDim, o));
  auto layers = std::make_shared<nn::ModuleList>();
  for (int64_t i = 0; i < n_layers; ++i)
    layers->append(std::make_shared<nn::TransformerBlock>(cfg, o));
  root->register_module("layers", layers);
  root->register_module("norm", std::make_shared<nn::RMSNorm>(kDim, std::nullopt, o));
  root->register_module("output", std::make_shared<nn::Linear>(kDim, kVocab, false, o));
  return root;
}

// Mean cross-entropy of logits [b, s, V] against targets [b, s] (put on the logits' mesh).
inline dt::DTensor loss_fn(const dt::DTensor& logits, const dt::DTensor& target) {
  const int64_t rows[] = {-1, kVocab};
  const int64_t flat[] = {-1};
  dt::DTensor t = dt::reshape(target, flat);
  if (!nn::is_local(logits)) {
    t = dt::DTensor::from_local(t.to_local(), logits.device_mesh(), {dt::Replicate()});
  }
  return dt::cross_entropy(dt::reshape(logits, rows), t);
}

// The entries of transformer_tp_plan(opts) whose first component is a child of `stage`.
inline dt::ParallelizePlan stage_plan(nn::Module& stage, dt::TransformerPlanOptions opts = {}) {
  dt::ParallelizePlan plan;
  for (const dt::PlanEntry& e : dt::transformer_tp_plan(opts)) {
    const std::string head = e.fqn.substr(0, e.fqn.find('.'));
    for (const auto& [name, child] : stage.named_children()) {
      if (name == head) plan.push_back(e);
    }
  }
  return plan;
}

struct Batch {
  dt::Tensor tokens, targets;
};
inline Batch batch(int step) {
  dt::Generator g(500 + step);
  return {dt::randint(0, kVocab, {kBatch, kSeq}, dt::TensorOptions(dt::kInt64), &g),
          dt::randint(0, kVocab, {kBatch, kSeq}, dt::TensorOptions(dt::kInt64), &g)};
}

// This rank's stages among `modules` (all pp * v stages; stage s on pp rank s % pp), tensor-
// parallel on the mesh's "tp" dim when `tp` (sequence-parallel too when `sp`).
inline std::vector<std::shared_ptr<pp::PipelineStage>> my_stages(
    const std::vector<nn::ModulePtr>& modules, const dt::DeviceMesh& mesh, int64_t v, bool tp,
    bool sp = false) {
  const int64_t p = mesh.size(mesh.dim_index("pp"));
  const int64_t r = mesh.get_local_rank("pp");
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  for (int64_t j = 0; j < v; ++j) {
    const int64_t s = j * p + r;
    if (tp) {
      dt::parallelize_module(*modules[s], mesh["tp"],
                             stage_plan(*modules[s], {.sequence_parallel = sp}));
    }
    stages.push_back(std::make_shared<pp::PipelineStage>(modules[s], s, p * v, mesh));
  }
  return stages;
}

// This rank's stages of `model` cut into pp * v stages.
inline std::vector<std::shared_ptr<pp::PipelineStage>> my_stages(const nn::ModulePtr& model,
                                                                 const dt::DeviceMesh& mesh,
                                                                 int64_t v, bool tp,
                                                                 bool sp = false) {
  return my_stages(pp::pipeline_split(model, mesh.size(mesh.dim_index("pp")) * v), mesh, v, tp, sp);
}

}  // namespace dtensor::test::pipeline
