// An environment variable set for one scope: the switches that library code reads at each call
// (DTENSOR_BF16_GEMM, DTENSOR_CONV, DTENSOR_CKPT_NO_EXCHANGE, ...) flipped between ops of one
// test and restored afterwards, also when a check throws.
#pragma once

#include <cstdlib>
#include <string>

namespace dtensor::test {

class ScopedEnv {
 public:
  // value "" (or nullptr) unsets the variable for the scope.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    set(value == nullptr || *value == '\0' ? nullptr : value);
  }
  ~ScopedEnv() { set(had_ ? old_.c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const char* value) const {
    if (value == nullptr) {
      unsetenv(name_.c_str());
    } else {
      setenv(name_.c_str(), value, 1);
    }
  }
  std::string name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace dtensor::test
