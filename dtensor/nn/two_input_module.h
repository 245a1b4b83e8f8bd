// The base of the modules whose forward takes two DTensors (the losses' (input, target), the
// distances' (x1, x2)).
#pragma once

#include <array>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/nn/module.h"

namespace dtensor::nn {

// A pre-hook of a two-input call: maps (a, b) to the inputs forward sees (PrepareModuleInput).
using TwoInputPreHook =
    std::function<std::pair<DTensor, DTensor>(Module&, const DTensor& a, const DTensor& b)>;

// module(a, b) runs the two-input pre-hooks (in registration order), then forward(a, b) (no
// forward hooks); Module's single-input forward and call stay visible and throw, as for any
// module that does not override them.
class TwoInputModule : public Module {
 public:
  using Module::forward;
  virtual DTensor forward(const DTensor& a, const DTensor& b) = 0;
  using Module::operator();
  DTensor operator()(const DTensor& a, const DTensor& b) {
    if (two_input_pre_hooks_.empty()) return forward(a, b);
    std::pair<DTensor, DTensor> in{a, b};
    for (auto& h : two_input_pre_hooks_) in = h(*this, in.first, in.second);
    return forward(in.first, in.second);
  }
  void register_two_input_pre_hook(TwoInputPreHook hook) {
    two_input_pre_hooks_.push_back(std::move(hook));
  }
  // The inputs' names, as PyTorch's forward names them (PrepareModuleInput's keyword layouts).
  virtual std::array<std::string_view, 2> input_names() const { return {"input", "target"}; }

 private:
  std::vector<TwoInputPreHook> two_input_pre_hooks_;
};

}  // namespace dtensor::nn
