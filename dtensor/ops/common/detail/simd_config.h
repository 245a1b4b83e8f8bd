// The instruction sets the vectorised CPU kernels (Google Highway) are compiled for. Included by
// simd_kernel-inl.h, the preamble of every Highway kernel file, before <hwy/foreach_target.h>.
//
// Highway's default on x86-64 compiles each kernel for SSSE3, SSE4, AVX2, AVX-512 (AVX3) and a
// portable fallback. SSSE3/SSE4 machines are rare among the ones this library targets and each
// extra target recompiles every kernel file, so they are disabled: the kernels exist for AVX2,
// AVX3 and the portable fallback (HWY_SCALAR with GCC < 12.3, whose EMU128 is marked broken;
// HWY_EMU128 otherwise), and HWY_DYNAMIC_DISPATCH picks the best one the CPU supports at the
// first call. A CPU without AVX2 runs the fallback, which is correct but not vectorised.
// Defining HWY_DISABLED_TARGETS on the compiler command line overrides this choice.
#pragma once

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
