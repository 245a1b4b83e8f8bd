// Pipeline checkpoints by global FQN, loadable at any pp degree.
//
// A pp rank holds the current values of its own stages only, while checkpoint::save wants every
// world rank to name the same tensors. So the whole model is gathered: each stage's parameters
// are gathered over the stage's mesh (full_tensor) by the ranks that run it, then broadcast over
// pp, and every rank gets them as local DTensors under the model's FQNs: a state dict that
// checkpoint::save writes once (from rank 0) and that loads into the model at any pp degree, or
// on one device. The whole model must fit in one rank's memory (as when it was built).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/pipeline/stage.h"

namespace dtensor::pipelining {

// The current parameters of all `stage_modules` (every stage, indexed by stage, e.g. all of
// pipeline_split()'s result; stage s runs on pp rank s % pp->size()), as local DTensors by FQN,
// in stage order. Collective over `pp` (one broadcast per parameter) and over each stage's mesh.
// Every pp rank passes the same stages (same names, shapes and dtypes).
std::vector<std::pair<std::string, DTensor>> gather_full_state_dict(
    const std::vector<nn::ModulePtr>& stage_modules, const CommunicatorPtr& pp);

// The same for stages whose modules live on their own pp rank only (models::pipeline_llama
// releases the others' modules): `my_stages` are this rank's stages (what make_schedule takes);
// each pp rank first broadcasts its stages' parameter names, dtypes and shapes. Collective over
// `pp` and over each stage's mesh. The result is the same on every rank, in stage order.
std::vector<std::pair<std::string, DTensor>> gather_full_state_dict(
    const std::vector<std::shared_ptr<PipelineStage>>& my_stages, const CommunicatorPtr& pp);

// Copies `full` (FQN -> the whole value, e.g. a state dict just read by checkpoint::load) into
// the parameters of `modules` (this rank's stages), each shard taken locally with no
// communication. Throws dtensor::Error "[load_full_state_dict] ..." for a parameter `full` does
// not name or whose shape or dtype differs (before anything is written).
void load_full_state_dict(const std::vector<nn::ModulePtr>& modules,
                          const std::vector<std::pair<std::string, DTensor>>& full);

}  // namespace dtensor::pipelining
