// torch.nn.Sequential: an ordered chain of modules whose forward feeds each module's output to
// the next. Children are named "0", "1", ... in order (or by the names given), so a
// Sequential's state_dict keys are PyTorch's ("0.weight", "2.bias", ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/nn/module.h"

namespace dtensor::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  // Children "0", "1", ... in the order given (none may be null).
  explicit Sequential(std::vector<ModulePtr> modules);
  Sequential(std::initializer_list<ModulePtr> modules)
      : Sequential(std::vector<ModulePtr>(modules)) {}
  // Named children in the order given (PyTorch's Sequential(OrderedDict(...))); names follow
  // register_module's rules and must be distinct.
  explicit Sequential(std::vector<std::pair<std::string, ModulePtr>> named_modules);

  std::string type_name() const override { return "Sequential"; }
  // x through every child in order, each called with its hooks (Module::operator()); an empty
  // Sequential returns x.
  DTensor forward(const DTensor& x) override;

  // Adds `module` at the end, named by its position ("3" for the fourth); returns *this.
  Sequential& append(ModulePtr module);
  // The number of children.
  size_t size() const { return named_children().size(); }
  bool empty() const { return size() == 0; }
  // The child at position i; a negative i counts from the end (-1 is the last). Out of range
  // raises "[Sequential] index 5 is out of range for a Sequential of 3 modules".
  Module& operator[](int64_t i) const { return *ptr(i); }
  const ModulePtr& ptr(int64_t i) const;
};

}  // namespace dtensor::nn
