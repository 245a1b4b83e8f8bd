// Splitting a model into pipeline stages by FQN split points (PyTorch's pipeline(...,
// split_spec={"layers.4": SplitPoint.BEGINNING})), for models written as a chain of modules.
//
// A chain is a module whose forward applies its children in registration order, each to the
// previous one's output: nn::ModuleList, and ModuleLists nested in one (their children are
// units of the chain too). Any other module is one unit, however deep. Split points name the
// unit (or the nested ModuleList) at which a new stage BEGINS, so k split points give k + 1
// stages. A stage is a module holding its units under their original fully-qualified names
// ("layers.3.attention.wq.weight" stays that), so its named_parameters() are the whole model's
// names: plans, optimizers' state and checkpoints key on the same FQNs at any pp degree.
// Stages share their modules with the model (no copy).
#pragma once

#include <string>
#include <vector>

#include "dtensor/nn/module.h"

namespace dtensor::pipelining {

// The chain's units in execution order, with their FQNs relative to `model` (for messages
// and for choosing split points).
std::vector<std::pair<std::string, nn::ModulePtr>> chain_units(const nn::ModulePtr& model);

// The stages of `model` cut before each of `split_points` (FQNs, in execution order, no
// repeats, none at the first unit). Throws dtensor::Error "[pipeline_split] split point
// 'layers.9' is not a unit of the chain (units: 0, 1, layers.0, ...)" for a name that is not
// there, "... out of order" / "... empty stage" for points that would give an empty stage.
// Every rank calls it with the same points (it involves no communication: each rank builds
// every stage and keeps the ones it runs).
std::vector<nn::ModulePtr> pipeline_split(const nn::ModulePtr& model,
                                          const std::vector<std::string>& split_points);

// The stages of `model` with `n_stages` stages of consecutive units, as even as the unit count
// allows (stage s starts at unit floor(s * units / n_stages): sizes differ by at most one, the
// later stages taking the larger); throws when there are fewer units than stages.
std::vector<nn::ModulePtr> pipeline_split(const nn::ModulePtr& model, int64_t n_stages);

// Registers `module` at `fqn` ("layers.3") below `root`, creating containers (modules with no
// forward) for the missing parents, so a stage's module tree mirrors the model's names (for
// stages built by hand, e.g. models::pipeline_llama's). Returns `module`.
nn::ModulePtr register_at_fqn(nn::Module& root, const std::string& fqn, nn::ModulePtr module);

}  // namespace dtensor::pipelining
