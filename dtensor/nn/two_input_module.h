// The base of the modules whose forward takes two DTensors (the losses' (input, target), the
// distances' (x1, x2)).
#pragma once

#include <array>
#include <string_view>

#include "dtensor/nn/module.h"

namespace dtensor::nn {

// module(a, b) runs forward(a, b) through the module's hooks (Module::call_with_hooks): the
// args forms see (a, b) (PyTorch's args tuple of two); the one-input forms are refused at
// registration. Module's single-input forward and call stay visible and throw, as for any module
// that does not override them.
class TwoInputModule : public Module {
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
};

}  // namespace dtensor::nn
