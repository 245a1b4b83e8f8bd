// Version checks for the tensors a backward lambda keeps (record_function's closures), as the
// engine does for a dispatched op's saved inputs and outputs (OpNode::check_versions) and
// PyTorch's SavedVariable does for ctx.save_for_backward: a lambda that captures a tensor and
// reads it in backward would otherwise read whatever an in-place op wrote into it after the
// forward, a silently wrong gradient.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "dtensor/tensor/tensor.h"

namespace dtensor::autograd {

// The storage versions of some tensors at the time they were saved (after the forward).
class SavedVersions {
 public:
  SavedVersions() = default;
  // Remembers each defined tensor's storage and its version now.
  explicit SavedVersions(std::initializer_list<Tensor> tensors);
  void save(const Tensor& t);
  // Throws "[backward] tensor i saved for backward by `node` was modified by an in-place op
  // after it was saved (version v, saved at version s) ..." when any storage was written since.
  void check(const std::string& node) const;

 private:
  struct Entry {
    Storage storage;
    uint32_t version = 0;
  };
  std::vector<Entry> entries_;
};

}  // namespace dtensor::autograd
