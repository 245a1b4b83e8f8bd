// The base of the modules whose forward takes two DTensors (the losses' (input, target), the
// distances' (x1, x2)).
#pragma once

#include "dtensor/nn/module.h"

namespace dtensor::nn {

// module(a, b) calls forward(a, b) (no forward hooks); Module's single-input forward and call
// stay visible and throw, as for any module that does not override them.
class TwoInputModule : public Module {
 public:
  using Module::forward;
  virtual DTensor forward(const DTensor& a, const DTensor& b) = 0;
  using Module::operator();
  DTensor operator()(const DTensor& a, const DTensor& b) { return forward(a, b); }
};

}  // namespace dtensor::nn
