// The Highway preamble of a vectorised CPU kernel file of the ops layer, in the one order that
// works: simd_config.h (the enabled targets) before <hwy/foreach_target.h>, which re-includes
// the kernel file once per target, then the per-target math of simd_math-inl.h. A kernel file
// defines HWY_TARGET_INCLUDE as its own path and includes this header:
//
//   #define HWY_TARGET_INCLUDE "dtensor/ops/norm/norm_cpu.cc"
//   #include "dtensor/ops/common/detail/simd_kernel-inl.h"  // IWYU pragma: keep
//
// No include guard: it is re-included with the kernel file for every target, and each header
// it names guards itself (foreach_target.h once, simd_math-inl.h per target).
#include "dtensor/ops/common/detail/simd_config.h"
// clang-format off: the order above and below is the point of this header.
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on
#include "dtensor/ops/common/detail/simd_math-inl.h"
