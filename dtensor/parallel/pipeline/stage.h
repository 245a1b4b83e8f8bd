// A pipeline stage (torch.distributed.pipelining.PipelineStage): the part of a model one pp
// rank runs, its place in the pipeline and the meshes it runs on.
//
// The mesh has a pp dim; the stage's activations and parameters live on the rest of it (the
// submesh of the other dims, e.g. dp x tp, where FSDP and tensor parallelism apply as usual;
// on a 1-d pp mesh, the self mesh: plain local tensors). Stage s runs on pp rank s % pp_size,
// so a rank holds one stage (GPipe, 1F1B) or several virtual stages s = r, r + p, ...
// (interleaved 1F1B). Activations and gradients cross stages point to point on the pp dim's
// communicator, between ranks of the same coordinate on the other dims: each rank sends its
// own shard, and the next stage receives it with the same placements.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/nn/module.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/parallel/pipeline/transfer.h"

namespace dtensor::pipelining {

class PipelineStage {
 public:
  // `module` is this stage's part of the model (e.g. one of pipeline_split()'s stages);
  // `stage_index` of `num_stages`; `mesh` has a dim named `pp_dim`. `example_input` (optional,
  // PyTorch's input_args): one microbatch's input of this stage, whose global shape, dtype and
  // placements every received activation must have (without it the stage takes what comes;
  // gradients are always checked against the stage's own output). Throws dtensor::Error
  // "[PipelineStage] ..." when stage_index is outside [0, num_stages), num_stages is not a
  // multiple of the pp size, or the stage does not belong to this rank (s % pp_size != pp rank).
  PipelineStage(nn::ModulePtr module, int64_t stage_index, int64_t num_stages,
                const DeviceMesh& mesh, std::string_view pp_dim = "pp",
                const DTensor& example_input = DTensor());

  nn::Module& submod() const { return *module_; }
  const nn::ModulePtr& module() const { return module_; }
  int64_t stage_index() const { return stage_index_; }
  int64_t num_stages() const { return num_stages_; }
  bool is_first() const { return stage_index_ == 0; }
  bool is_last() const { return stage_index_ == num_stages_ - 1; }
  // The mesh given, and the mesh of the stage's activations (the non-pp dims, or self mesh).
  const DeviceMesh& mesh() const { return mesh_; }
  const DeviceMesh& stage_mesh() const { return stage_mesh_; }
  // The pp dim's communicator (this rank's line) and the pp rank that runs stage `s`.
  const CommunicatorPtr& pp_group() const { return pp_; }
  int pp_rank_of(int64_t s) const { return static_cast<int>(s % pp_->size()); }
  // The input every received activation must match (from example_input), if given.
  const std::optional<detail::TensorMeta>& expected_input() const { return expected_input_; }
  // fully_shard's / replicate's handle of the stage's module, when it has one (PyTorch's stage
  // sees an FSDPModule submod): the schedule then reduces the stage's gradients once per step, in
  // its last microbatch's backward (pipeline_schedule.h).
  void set_data_parallel(std::shared_ptr<DataParallel> dp) { data_parallel_ = std::move(dp); }
  const std::shared_ptr<DataParallel>& data_parallel() const { return data_parallel_; }

 private:
  nn::ModulePtr module_;
  int64_t stage_index_;
  int64_t num_stages_;
  DeviceMesh mesh_;
  DeviceMesh stage_mesh_;
  CommunicatorPtr pp_;
  std::optional<detail::TensorMeta> expected_input_;
  std::shared_ptr<DataParallel> data_parallel_;
};

}  // namespace dtensor::pipelining
