#include "dtensor/ops/common/detail/simd_dispatch.h"

// The same target set as the kernel files (simd_config.h before Highway's headers), so
// HWY_TARGETS below means what they compiled.
// clang-format off
#include "dtensor/ops/common/detail/simd_config.h"
#include <hwy/highway.h>
#include <hwy/targets.h>
// clang-format on

namespace dtensor::detail {

std::vector<SimdTarget> simd_targets() {
  std::vector<SimdTarget> out;
  // SupportedAndGeneratedTargets lists the lowest bit first; lower bits are the better targets.
  for (int64_t bits : hwy::SupportedAndGeneratedTargets()) {
    out.push_back({bits, hwy::TargetName(bits)});
  }
  return out;
}

std::string simd_target_name() {
  const int64_t chosen = hwy::SupportedTargets() & HWY_TARGETS;
  // The best target is the lowest set bit.
  return chosen == 0 ? "none" : hwy::TargetName(chosen & -chosen);
}

SimdTargetOverride::SimdTargetOverride(const SimdTarget& target) {
  // Also resets the dispatch tables' cached choice, so the next kernel call chooses again.
  hwy::SetSupportedTargetsForTest(target.bits);
}

SimdTargetOverride::~SimdTargetOverride() {
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace dtensor::detail
