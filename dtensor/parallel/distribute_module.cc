#include "dtensor/parallel/distribute_module.h"

#include <absl/container/flat_hash_map.h>

#include <string>
#include <utility>
#include <vector>

#include "dtensor/tensor/error.h"

namespace dtensor {

nn::Module& distribute_module(nn::Module& module, const DeviceMesh& mesh,
                              const PartitionFn& partition_fn, const InputFn& input_fn,
                              const OutputFn& output_fn) {
  DT_CHECK(mesh.defined(), "[distribute_module] the device mesh is an empty handle");
  if (partition_fn) {
    for (auto& [name, m] : module.named_modules()) partition_fn(name, *m, mesh);
  }
  // What partition_fn left off the mesh is replicated from the mesh's first rank. A tied
  // parameter is an own parameter of several modules (one leaf): it is placed where
  // named_parameters() lists it (its first owner in pre-order) and that same leaf is put in
  // the other owners' slots, so the tie survives.
  // A leaf's identity is its autograd record, as named_parameters() dedups ties.
  absl::flat_hash_map<const void*, std::string> primary;  // leaf -> its fqn
  for (const auto& [fqn, value] : module.named_parameters()) {
    if (value.autograd_meta() != nullptr) primary.emplace(value.autograd_meta().get(), fqn);
  }
  const Placements replicated(static_cast<size_t>(mesh.ndim()), Replicate());
  std::vector<std::pair<nn::Module*, std::pair<std::string, std::string>>> aliases;
  for (auto& [prefix, m] : module.named_modules()) {
    const std::vector<std::pair<std::string, DTensor>> own = m->own_parameters();
    for (const auto& [name, value] : own) {
      const std::string fqn = prefix.empty() ? name : prefix + "." + name;
      if (value.autograd_meta() != nullptr) {
        const std::string& first = primary.at(value.autograd_meta().get());
        if (first != fqn) {
          aliases.push_back({m, {name, first}});
          continue;
        }
      }
      if (value.device_mesh() == mesh) continue;
      DT_CHECK(is_local(value),
               "[distribute_module] parameter '%s' is on %s after partition_fn; expected mesh "
               "%s (or a local parameter, which is then replicated)",
               fqn, value.device_mesh().str(), mesh.str());
      m->set_parameter(name, distribute_tensor(value.to_local(), mesh, replicated));
    }
  }
  for (const auto& [m, names] : aliases) {
    m->swap_parameter(names.first, module.get_parameter(names.second));
  }
  if (input_fn) {
    module.register_forward_pre_hook(
        [input_fn, mesh](nn::Module& m, const DTensor& x) { return input_fn(m, x, mesh); });
  }
  if (output_fn) {
    // The args form: output_fn runs on a module of any number of inputs (a loss too).
    module.register_forward_hook([output_fn, mesh](nn::Module& m, absl::Span<const DTensor>,
                                                   DTensor& y) -> std::optional<DTensor> {
      return output_fn(m, std::move(y), mesh);
    });
  }
  return module;
}

}  // namespace dtensor
