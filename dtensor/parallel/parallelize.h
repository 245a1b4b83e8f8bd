// parallelize_module: applies a plan of ParallelStyles to a module tree (PyTorch
// torch.distributed.tensor.parallel.parallelize_module).
//
//   dt::ParallelizePlan plan = {
//       {"layers.*.attention.wq", dt::ColwiseParallel()},
//       {"layers.*.attention.wo", dt::RowwiseParallel()},
//       {"layers.*.mlp.fc1", dt::ColwiseParallel()},
//       {"layers.*.mlp.fc2", dt::RowwiseParallel({.output_layouts = dt::Shard(1)})},
//   };
//   dt::parallelize_module(model, mesh["tp"], plan);
#pragma once

#include <concepts>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/parallel/style.h"

namespace dtensor {

// One plan entry: a fully-qualified submodule name, where a component may contain '*'
// wildcards matching any run of characters within that component ("layers.*.mlp.fc1"), and
// the style applied to every submodule it matches.
struct PlanEntry {
  std::string fqn;         // submodule name pattern
  ParallelStylePtr style;  // what to apply to the matches

  // An entry from a shared style or from a style value ({"fc1", ColwiseParallel()}).
  PlanEntry(std::string f, ParallelStylePtr s) : fqn(std::move(f)), style(std::move(s)) {}
  template <std::derived_from<ParallelStyle> S>
  PlanEntry(std::string f, S s) : fqn(std::move(f)), style(std::make_shared<S>(std::move(s))) {}
};
// A plan: entries applied in order.
using ParallelizePlan = std::vector<PlanEntry>;

// Applies each entry in order to the submodules it matches (pre-order), then runs every
// module's check_parallel(). No communication. Throws
//   "[parallelize_module] plan entry 'layers.*.mlpp' matches no submodule"
// for an entry that matches nothing (before anything is changed), and the style's own error
// for a module type it does not fit ("[ColwiseParallel] expects Linear or Embedding, got
// LayerNorm at 'norm'"). Returns `module`.
nn::Module& parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                               const ParallelizePlan& plan);
// Applies one style to `module` itself.
nn::Module& parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                               const ParallelStyle& style);

// Whether a dotted name matches a dotted pattern component by component ('*' within a
// component matches any characters except '.'); exposed for tests.
bool fqn_matches(std::string_view pattern, std::string_view fqn);

}  // namespace dtensor
