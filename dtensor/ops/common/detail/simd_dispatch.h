// Which instruction set the vectorised CPU kernels run with (see simd_config.h), and a way for
// tests to run them with each compiled one in turn. Internal to the ops layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtensor::detail {

// One instruction set the kernels were compiled for.
struct SimdTarget {
  int64_t bits = 0;  // Highway's HWY_* target bit
  std::string name;  // "AVX2", "AVX3", "SCALAR", ...
};

// The targets compiled into the library that this CPU can run, best first.
std::vector<SimdTarget> simd_targets();

// The name of the target the kernels dispatch to now (the best one, unless a
// SimdTargetOverride is active).
std::string simd_target_name();

// For tests: while alive, the kernels dispatch to `target` (one of simd_targets()) as if it were
// the best the CPU supports. Not thread-safe: construct it while no kernel runs on another
// thread. The destructor restores the normal choice.
class SimdTargetOverride {
 public:
  explicit SimdTargetOverride(const SimdTarget& target);
  ~SimdTargetOverride();
  SimdTargetOverride(const SimdTargetOverride&) = delete;
  SimdTargetOverride& operator=(const SimdTargetOverride&) = delete;
};

}  // namespace dtensor::detail
