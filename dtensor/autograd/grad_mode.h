// Whether DTensor ops are recorded for backward on this thread (libtorch's GradMode,
// NoGradGuard, AutoGradMode and InferenceMode).
#pragma once

namespace dtensor::autograd {

// True (the default) when ops with an input that requires grad are recorded on this thread.
bool grad_enabled();
void set_grad_enabled(bool enabled);

// Sets grad mode to `enabled` for its scope and restores the previous mode (torch::AutoGradMode).
class AutoGradMode {
 public:
  // Sets grad mode to `enabled` on this thread until the guard goes.
  explicit AutoGradMode(bool enabled);
  ~AutoGradMode();
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

// No recording in its scope (torch::NoGradGuard): outputs do not require grad. Optimizer
// steps and evaluation run under it.
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

// torch::InferenceMode: here the same as NoGradGuard (no recording, no saved tensors); unlike
// PyTorch, DTensors created inside are not marked as inference tensors, so they may later be
// used in recorded ops like any tensor that does not require grad.
class InferenceMode : public AutoGradMode {
 public:
  InferenceMode() : AutoGradMode(false) {}
};

}  // namespace dtensor::autograd
