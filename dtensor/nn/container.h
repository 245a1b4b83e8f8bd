// torch.nn's containers: Sequential, ModuleDict, ParameterList, ParameterDict (ModuleList is in
// transformer.h).
//
// torch.nn.Sequential: an ordered chain of modules whose forward feeds each module's output to
// the next. Children are named "0", "1", ... in order (or by the names given), so a
// Sequential's state_dict keys are PyTorch's ("0.weight", "2.bias", ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
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

// torch.nn.ModuleDict (round 9): children by name, in insertion order (state_dict keys
// "<name>.<param>"); insert replaces a child of the same name in place, as PyTorch's
// __setitem__. No forward (calling it raises, as PyTorch's).
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  explicit ModuleDict(std::vector<std::pair<std::string, ModulePtr>> modules);
  std::string type_name() const override { return "ModuleDict"; }
  ModuleDict& insert(std::string name, ModulePtr module);
  bool contains(std::string_view name) const;
  // The child `name`; a missing one raises "[ModuleDict] no module named 'x'".
  Module& operator[](std::string_view name) const;
  std::vector<std::string> keys() const;
  size_t size() const { return named_children().size(); }
};

// torch.nn.ParameterList / ParameterDict (round 9): parameters named "0", "1", ... / by key, in
// insertion order (leaves that require grad when floating, as register_parameter makes them).
// ParameterDict::insert of an existing key replaces it by set_parameter (same shape and dtype).
class ParameterList : public Module {
 public:
  ParameterList() = default;
  explicit ParameterList(const std::vector<DTensor>& values);
  std::string type_name() const override { return "ParameterList"; }
  ParameterList& append(const DTensor& value);
  // The i-th parameter; a negative i counts from the end.
  const DTensor& operator[](int64_t i) const;
  size_t size() const { return own_parameters().size(); }
};

class ParameterDict : public Module {
 public:
  ParameterDict() = default;
  explicit ParameterDict(const std::vector<std::pair<std::string, DTensor>>& values);
  std::string type_name() const override { return "ParameterDict"; }
  ParameterDict& insert(std::string name, const DTensor& value);
  bool contains(std::string_view name) const { return has_param(name); }
  const DTensor& operator[](std::string_view name) const { return param(name); }
  std::vector<std::string> keys() const;
  size_t size() const { return own_parameters().size(); }
};

}  // namespace dtensor::nn
