// The bases of the modules whose forward takes several DTensors: MultiInputModule, and
// TwoInputModule for two (the losses' (input, target), the distances' (x1, x2)); nn::ThreeInputLoss
// (loss.h) for three.
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "dtensor/nn/module.h"

namespace dtensor::nn {

// A module whose call takes several DTensors and runs through the module's hooks
// (Module::call_with_hooks): the args forms see every input; the one-input forms are refused at
// registration (Module::register_*), and PrepareModuleInput lays out each input by position or
// by name.
class MultiInputModule : public Module {
 public:
  // The inputs' names in call order, as PyTorch's forward names them; their count is the call's.
  virtual std::vector<std::string_view> input_name_list() const = 0;
};

// module(a, b) runs forward(a, b) through the module's hooks (Module::call_with_hooks): the
// args forms see (a, b) (PyTorch's args tuple of two); the one-input forms are refused at
// registration. Module's single-input forward and call stay visible and throw, as for any module
// that does not override them.
class TwoInputModule : public MultiInputModule {
 public:
  using Module::forward;
  virtual DTensor forward(const DTensor& a, const DTensor& b) = 0;
  using Module::operator();
  DTensor operator()(const DTensor& a, const DTensor& b) {
    if (!has_hooks()) return forward(a, b);
    const DTensor args[] = {a, b};
    return call_with_hooks(args,
                           [this](absl::Span<const DTensor> in) { return forward(in[0], in[1]); });
  }
  // The inputs' names, as PyTorch's forward names them (PrepareModuleInput's keyword layouts).
  virtual std::array<std::string_view, 2> input_names() const { return {"input", "target"}; }
  std::vector<std::string_view> input_name_list() const final {
    const auto names = input_names();
    return {names.begin(), names.end()};
  }
};

}  // namespace dtensor::nn
