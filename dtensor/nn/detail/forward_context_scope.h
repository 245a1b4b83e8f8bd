// Makes a module's forward context (nn::Module::forward_context) current for a scope and
// restores the previous one on exit, an exception too: activation checkpointing's recompute, and
// a parent passing its call's masks to a child called through Module's operator()
// (TransformerEncoderLayer -> MultiheadAttention).
#pragma once

#include <memory>
#include <utility>

#include "dtensor/nn/module.h"

namespace dtensor::nn::detail {

class ForwardContextScope {
 public:
  ForwardContextScope(Module& m, std::shared_ptr<const void> context)
      : m_(m), previous_(m.set_forward_context(std::move(context))) {}
  ~ForwardContextScope() { m_.set_forward_context(std::move(previous_)); }
  ForwardContextScope(const ForwardContextScope&) = delete;
  ForwardContextScope& operator=(const ForwardContextScope&) = delete;

 private:
  Module& m_;
  std::shared_ptr<const void> previous_;
};

}  // namespace dtensor::nn::detail
