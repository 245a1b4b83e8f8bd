// models::Llama under pipeline parallelism (issue 45 item 2 for the Llama): stages cut at
// decoder-layer boundaries (model.embed_tokens on the first, model.norm and lm_head on the last),
// on a mesh with a "pp" dim beside the dp / tp dims of parallelize_llama. Each stage is a module
// holding its parts under the Llama's own names (model.layers.3.mlp.up_proj.weight), so
// optimizers and checkpoints key on the same FQNs at any pp degree, and runs in
// dtensor::pipelining's schedules (dtensor/parallel/pipeline/).
//
// Usage (every rank builds the whole model with the same seed, or loads the same checkpoint):
//   auto mesh = dt::init_device_mesh(dt::kCPU, {2, 2, 2}, {"pp", "dp", "tp"});
//   auto model = std::make_shared<models::Llama>(cfg);
//   models::LlamaPipeline pipe = models::pipeline_llama(model, mesh);
//   auto schedule = pipelining::make_schedule("1F1B", pipe.stages, /*n_microbatches=*/4,
//       [](const DTensor& logits, const DTensor& labels) {
//         return models::causal_lm_loss(logits, labels); });
//   double loss = schedule->step(ids, labels);  // ids on the first stage, labels on the last
// The stages' parameters: pipe.parameters() (this rank's).
//
// Memory: as torchtitan's pipeline split, the model keeps only this rank's stages' modules
// (release_unused, the default): the other decoder layers, and embed_tokens / norm / lm_head
// where this rank has no first / last stage, are released (Llama::keep_pipeline_modules), so
// parameters, gradients and optimizer states per rank are those of its stages. The model then no
// longer runs its own forward; a checkpoint of the stages (pipelining::gather_full_state_dict
// of pipe.stages: the owners send their stages' names too) still holds every FQN once and loads
// at any pp degree (tests/models/test_llama_pipeline_checkpoint_mpi.cc). release_unused = false
// keeps the whole model (it still runs model(ids), e.g. to compare with the stages).
//
// FSDP: each stage's fully_shard handle is set on its PipelineStage, so the schedule reduces the
// stage's gradients once per step (in its last microbatch's backward; pipeline_schedule.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/models/llama.h"
#include "dtensor/models/llama_plan.h"
#include "dtensor/parallel/pipeline/stage.h"

namespace dtensor::models {

struct LlamaPipeline {
  // This rank's stages, in increasing stage index (what make_schedule takes).
  std::vector<std::shared_ptr<pipelining::PipelineStage>> stages;
  // fully_shard's handle of each stage, when the mesh has a dp dim.
  std::vector<std::shared_ptr<DataParallel>> data_parallel;
  // This rank's parameters (every stage's), for the optimizer and clip_grad_norm_.
  std::vector<DTensor> parameters() const;
};

// Cuts `model` into pp * stages_per_rank stages of consecutive decoder layers (as even as the
// layer count allows, the later stages taking the larger), tensor-parallelizes the whole model on
// mesh[tp_dim] (llama_tp_plan), runs attention context parallel over mesh[cp_dim] (as
// parallelize_llama: this rank's head-tail chunks, ring attention) and fully_shards each of this
// rank's stages over dp x cp (one unit per decoder layer, the stage the rest). Stage s runs on
// pp rank s % pp (interleaved schedules: stages_per_rank > 1). The mesh has the dim `pp_dim` and
// any of options' dp / cp / tp dims, no other. Under a schedule, each microbatch's logits are
// the last stage's output; with a cp dim the first stage takes the whole rows, the logits are
// this rank's chunks and the loss is causal_lm_loss(model, logits, labels) on the whole rows.
// Throws "[pipeline_llama] ..." on every rank (from the config and the mesh shape) for fewer
// decoder layers than stages, tied embeddings (the table would live on the first and last
// stage), other dims.
LlamaPipeline pipeline_llama(const std::shared_ptr<Llama>& model, const DeviceMesh& mesh,
                             LlamaParallelOptions options = {}, const std::string& pp_dim = "pp",
                             int64_t stages_per_rank = 1, bool release_unused = true);

}  // namespace dtensor::models
