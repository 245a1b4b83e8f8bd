#include "dtensor/parallel/pipeline/stage.h"

#include "dtensor/tensor/error.h"

namespace dtensor::pipelining {

PipelineStage::PipelineStage(nn::ModulePtr module, int64_t stage_index, int64_t num_stages,
                             const DeviceMesh& mesh, std::string_view pp_dim,
                             const DTensor& example_input)
    : module_(std::move(module)), stage_index_(stage_index), num_stages_(num_stages), mesh_(mesh) {
  DT_CHECK(module_ != nullptr, "[PipelineStage] stage %lld has no module",
           static_cast<long long>(stage_index));
  DT_CHECK(mesh.contains_me(), "[PipelineStage] this rank is not on the mesh %s",
           mesh.str().c_str());
  const int64_t pp_index = mesh.dim_index(pp_dim);
  pp_ = mesh.communicator(pp_index);
  const int64_t p = mesh.size(pp_index);
  DT_CHECK(stage_index >= 0 && stage_index < num_stages,
           "[PipelineStage] stage_index %lld is outside [0, %lld)",
           static_cast<long long>(stage_index), static_cast<long long>(num_stages));
  DT_CHECK(num_stages % p == 0 && num_stages / p <= detail::kMaxStages / p,
           "[PipelineStage] %lld stages over a pp dim of %lld ranks: the number of stages must "
           "be a multiple of the pp size (stage s runs on pp rank s %% pp size), at most %lld",
           static_cast<long long>(num_stages), static_cast<long long>(p),
           static_cast<long long>(detail::kMaxStages));
  DT_CHECK(stage_index % p == pp_->rank(),
           "[PipelineStage] stage %lld runs on pp rank %lld, but this is pp rank %d",
           static_cast<long long>(stage_index), static_cast<long long>(stage_index % p),
           pp_->rank());
  if (mesh.ndim() == 1) {
    stage_mesh_ = self_mesh(mesh.device_type());
  } else {
    std::vector<int64_t> rest;
    for (int64_t d = 0; d < mesh.ndim(); ++d) {
      if (d != pp_index) rest.push_back(d);
    }
    stage_mesh_ = mesh.submesh(rest);
  }
  if (example_input.defined()) expected_input_ = detail::TensorMeta::of(example_input, stage_mesh_);
}

}  // namespace dtensor::pipelining
