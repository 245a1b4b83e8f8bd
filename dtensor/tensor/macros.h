// Portability macros shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define DT_HOST_DEVICE __host__ __device__
#define DT_DEVICE __device__
#else
#define DT_HOST_DEVICE
#define DT_DEVICE
#endif

#define DT_FORCE_INLINE inline __attribute__((always_inline))
