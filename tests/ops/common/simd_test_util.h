// Runs a test body once per instruction set the vectorised CPU kernels were compiled for and
// this CPU supports (AVX2, AVX3, the portable fallback; dtensor/ops/common/detail/simd_config.h),
// so the fallback that machines without AVX2 run is tested here too.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "dtensor/ops/common/detail/simd_dispatch.h"

namespace dtensor::test {

template <typename F>
void for_each_simd_target(F&& body) {
  const auto targets = detail::simd_targets();
  REQUIRE(!targets.empty());
  for (const auto& t : targets) {
    detail::SimdTargetOverride guard(t);
    INFO("SIMD target " << t.name);
    REQUIRE(detail::simd_target_name() == t.name);
    body(t.name);
  }
}

}  // namespace dtensor::test
