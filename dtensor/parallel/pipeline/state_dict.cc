#include "dtensor/parallel/pipeline/state_dict.h"

#include <map>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::pipelining {

std::vector<std::pair<std::string, DTensor>> gather_full_state_dict(
    const std::vector<nn::ModulePtr>& stage_modules, const CommunicatorPtr& pp) {
  DT_CHECK(pp != nullptr, "[gather_full_state_dict] no pp group (this rank is not on the mesh)");
  std::vector<std::pair<std::string, DTensor>> out;
  for (size_t s = 0; s < stage_modules.size(); ++s) {
    const int owner = static_cast<int>(s % static_cast<size_t>(pp->size()));
    for (const auto& [fqn, param] : stage_modules[s]->named_parameters()) {
      Tensor full =
          owner == pp->rank()
              ? param.full_tensor().contiguous()
              : empty(param.shape(),
                      TensorOptions(param.dtype(), Device(param.device_mesh().device_type())));
      if (pp->size() > 1) {
        CollectiveLabel label("pipeline state dict");
        pp->broadcast(full, owner)->wait();
      }
      out.emplace_back(fqn, local_dtensor(full));
    }
  }
  return out;
}

void load_full_state_dict(const std::vector<nn::ModulePtr>& modules,
                          const std::vector<std::pair<std::string, DTensor>>& full) {
  std::map<std::string, const DTensor*> by_name;
  for (const auto& [fqn, value] : full) by_name[fqn] = &value;
  std::vector<std::pair<DTensor, const DTensor*>> copies;
  for (const nn::ModulePtr& m : modules) {
    for (const auto& [fqn, param] : m->named_parameters()) {
      auto it = by_name.find(fqn);
      DT_CHECK(it != by_name.end(), "[load_full_state_dict] no value for parameter '%s'",
               fqn.c_str());
      const DTensor& v = *it->second;
      DT_CHECK(v.shape() == param.shape() && v.dtype() == param.dtype(),
               "[load_full_state_dict] '%s' is %s %s in the state dict but %s %s in the model",
               fqn.c_str(), std::string(dtype_name(v.dtype())).c_str(),
               shape_str(v.shape()).c_str(), std::string(dtype_name(param.dtype())).c_str(),
               shape_str(param.shape()).c_str());
      copies.emplace_back(param, &v);
    }
  }
  autograd::NoGradGuard no_grad;
  for (auto& [param, value] : copies) {
    // Every rank holds the whole value: each takes its own shard (no communication).
    const DTensor shard = distribute_tensor(value->full_tensor(), param.device_mesh(),
                                            param.placements(), std::nullopt);
    Tensor local = param.to_local();  // a handle on the parameter's storage
    local.copy_(shard.to_local());
  }
}

}  // namespace dtensor::pipelining
