// Module grouping for fully-sharded data parallel: which modules are units (each all-gathers
// its parameters before its forward and reduce-scatters their gradients as one collective),
// and which unit owns each parameter.
//
// Rules: the root is always a unit. A non-root module is a unit when its type_name() is in
// `module_types`, or when `min_unit_numel` > 0 and the parameters of its subtree not owned by
// nested units hold at least that many elements (decided bottom-up, so nested units count
// first). Each unit owns the parameters of its subtree minus those of nested units; a
// parameter registered in several modules (nn::Module::tie_parameter) belongs to the unit
// nearest above the lowest common ancestor of those modules, so every parameter belongs to
// exactly one unit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/nn/module.h"

namespace dtensor {

struct GroupingPolicy {
  std::vector<std::string> module_types;  // e.g. {"TransformerBlock"}
  int64_t min_unit_numel = 0;             // 0: no threshold
};

// Where a parameter lives: every (module, own name) slot holding it (several when tied).
struct ParamSlot {
  nn::Module* module = nullptr;
  std::string name;
};

struct UnitParam {
  std::string fqn;  // first name in pre-order (named_parameters())
  std::vector<ParamSlot> slots;
};

struct Unit {
  std::string fqn;  // the unit module's name ("" for the root)
  nn::Module* module = nullptr;
  std::vector<UnitParam> params;  // in named_parameters() order
};

// Units in pre-order (the root first).
std::vector<Unit> group_modules(nn::Module& root, const GroupingPolicy& policy);

// One line per unit: "unit 'layers.0' (TransformerBlock): 3 params, 1234 elements:
// attention.wq.weight [8, 8], ..." (the root is named '<root>').
std::string grouping_str(const std::vector<Unit>& units);

}  // namespace dtensor
