// Which compiled steps and graphs are running on this thread: a chain of the scopes their calls
// open, innermost first, through the callers' stack frames (no allocation). Code a replay runs
// (an EagerFunction's forward or backward, an override's module) could call its own step or
// replay its own graph again; that inner run would reuse the slots, buffers and replay pool the
// outer one is using (the pool's begin_use would wait for the outer replay forever). A run asks
// running() first and refuses instead.
#pragma once

namespace dtensor::compiler {

class RunningScope {
 public:
  explicit RunningScope(const void* owner) : owner_(owner), outer_(innermost_) {
    innermost_ = this;
  }
  ~RunningScope() { innermost_ = outer_; }
  RunningScope(const RunningScope&) = delete;
  RunningScope& operator=(const RunningScope&) = delete;
  // Whether a scope of `owner` is open on this thread.
  static bool running(const void* owner) {
    for (const RunningScope* s = innermost_; s != nullptr; s = s->outer_) {
      if (s->owner_ == owner) return true;
    }
    return false;
  }

 private:
  const void* owner_;
  const RunningScope* outer_;
  static inline thread_local const RunningScope* innermost_ = nullptr;
};

}  // namespace dtensor::compiler
