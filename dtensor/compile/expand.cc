// Data-parallel expansion of a single-device step (dtensor/compile/compile.h): data_parallel
// applied to the step's module, the optimizer made to follow its parameters, the global batch cut
// into this rank's share, and the step compiled — data parallel's hooks record their collectives
// as primitives, so the graph is the data-parallel step.
#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <utility>

#include "dtensor/compile/compile.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// The dp dim of `mesh`: its only dim, or the one named options.dp_dim_name.
int64_t dp_dim_of(const DeviceMesh& mesh, const DataParallelOptions& options) {
  if (mesh.ndim() == 1) return 0;
  const auto& names = mesh.dim_names();
  const auto it = std::find(names.begin(), names.end(), options.dp_dim_name);
  DT_CHECK(it != names.end(),
           "[compile] data-parallel expansion: the mesh %s has no dim named '%s'", mesh.str(),
           options.dp_dim_name);
  return it - names.begin();
}

// The FQN in `module` of each of the optimizer's parameters (matched by the identity of its
// local tensor), resolved before data_parallel replaces them.
std::vector<std::string> fqns_of(const std::vector<DTensor>& params, const nn::Module& module) {
  absl::flat_hash_map<const void*, std::string> fqn_of;
  for (const auto& [fqn, p] : module.named_parameters()) fqn_of[p.to_local().storage().id()] = fqn;
  std::vector<std::string> fqns;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = fqn_of.find(params[i].to_local().storage().id());
    DT_CHECK(it != fqn_of.end(),
             "[compile] data-parallel expansion: optimizer parameter %d (%s) is not a parameter "
             "of CompileOptions::module",
             i, params[i].str());
    fqns.push_back(it->second);
  }
  return fqns;
}

}  // namespace

CompiledStep compile(CompiledStep::StepFn fn, const DeviceMesh& mesh, DataParallelStyle style,
                     CompileOptions options) {
  DT_CHECK(static_cast<bool>(fn), "[compile] the step function is empty");
  DT_CHECK(options.module != nullptr,
           "[compile] data-parallel expansion needs CompileOptions::module (the model the step "
           "trains)");
  nn::Module& module = *options.module;
  // Everything that can be refused is refused before the module is touched: an optimizer that
  // has state cannot follow (replacing its parameters by themselves runs the same checks), nor
  // one whose parameters the module does not hold.
  std::vector<std::string> fqns;
  if (options.optimizer != nullptr) {
    options.optimizer->replace_parameters(options.optimizer->parameters());
    fqns = fqns_of(options.optimizer->parameters(), module);
  }
  data_parallel(module, mesh, style, options.data_parallel);
  if (options.optimizer != nullptr) {
    std::vector<DTensor> now;
    for (const std::string& fqn : fqns) now.push_back(module.get_parameter(fqn));
    options.optimizer->replace_parameters(std::move(now));
  }
  const int64_t dim = dp_dim_of(mesh, options.data_parallel);
  const int64_t n = mesh.size(dim);
  const int64_t rank = mesh.get_local_rank(dim);
  auto share = [fn = std::move(fn), n, rank](const DTensorList& batch) {
    DTensorList mine;
    mine.reserve(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const DTensor& x = batch[i];
      DT_CHECK(x.defined() && is_local(x),
               "[compile] input %d of the data-parallel step is %s: pass the global batch as "
               "local DTensors (nn::local_dtensor), the same on every rank",
               i, x.defined() ? x.str() : std::string("undefined"));
      if (x.dim() == 0) {
        mine.push_back(x);
        continue;
      }
      // Equal shares: each rank's loss is the mean over its rows, and the average of the ranks'
      // gradients is the global batch's only when the shares are equal (as DDP assumes).
      DT_CHECK(x.size(0) % n == 0,
               "[compile] input %d of the data-parallel step has %d rows on dim 0 (the batch "
               "dim), not a multiple of the %d data-parallel ranks",
               i, x.size(0), n);
      const int64_t rows = x.size(0) / n;
      mine.push_back(narrow(x, 0, rank * rows, rows));
    }
    return fn(mine);
  };
  return CompiledStep(std::move(share), std::move(options));
}

}  // namespace dtensor
