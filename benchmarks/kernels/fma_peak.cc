#include "benchmarks/kernels/fma_peak.h"

#include <chrono>
#include <cstdint>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dtensor::bench {

namespace {

// 12 accumulators: more than FMA latency (4 cycles) x FMA ports (2) on current x86 cores.
constexpr int kChains = 12;

// acc = acc * a + b converges to b / (1 - a) (no overflow, no subnormals); the sum of the
// chains is returned so that the loop is not removed.
#define DT_FMA_LOOP(V, T)                                        \
  V acc[kChains];                                                \
  V a, b;                                                        \
  for (int j = 0; j < kChains; ++j) acc[j] = a = b = V{} + T(0); \
  a = a + T(0.999999);                                           \
  b = b + T(1e-3);                                               \
  for (int64_t i = 0; i < iters; ++i) {                          \
    for (int j = 0; j < kChains; ++j) acc[j] = acc[j] * a + b;   \
  }                                                              \
  V s = V{};                                                     \
  for (int j = 0; j < kChains; ++j) s = s + acc[j];              \
  return s[0];

#if defined(__x86_64__) || defined(__i386__)
template <typename T>
__attribute__((target("avx512f,fma"))) T loop512(int64_t iters) {
  typedef T V __attribute__((vector_size(64)));
  DT_FMA_LOOP(V, T)
}
template <typename T>
__attribute__((target("avx2,fma"))) T loop256(int64_t iters) {
  typedef T V __attribute__((vector_size(32)));
  DT_FMA_LOOP(V, T)
}
#endif
template <typename T>
T loop128(int64_t iters) {
  typedef T V __attribute__((vector_size(16)));
  DT_FMA_LOOP(V, T)
}
#undef DT_FMA_LOOP

#if defined(__x86_64__) || defined(__i386__)
// AVX-512 BF16's dot product (vdpbf16ps): per float32 lane, two bf16 products added to the
// accumulator; acc grows by 2e-6 per step (no overflow within the loop's lengths).
__attribute__((target("avx512f,avx512bf16"))) float loop_bf16(int64_t iters) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_setzero_ps();
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, a);
  }
  __m512 s = _mm512_setzero_ps();
  for (int j = 0; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_reduce_add_ps(s);
}
#endif

int width_bytes() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 64;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 32;
#endif
  return 16;
}

// GFLOP/s of `loop` run on `bytes`-wide vectors of T, `per_lane` flops per lane and step.
template <typename T>
double timed(T (*loop)(int64_t), int bytes, double per_lane, double seconds) {
  volatile T sink = 0;
  int64_t iters = 1 << 16;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + loop(iters);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dt >= seconds) {
      const double lanes = static_cast<double>(bytes) / sizeof(T);
      return per_lane * lanes * kChains * static_cast<double>(iters) / dt / 1e9;
    }
    iters *= 2;
  }
}

template <typename T>
double run(double seconds) {
  const int bytes = width_bytes();
#if defined(__x86_64__) || defined(__i386__)
  auto loop = bytes == 64 ? loop512<T> : bytes == 32 ? loop256<T> : loop128<T>;
#else
  auto loop = loop128<T>;
#endif
  return timed(loop, bytes, 2.0, seconds);
}

}  // namespace

double fma_peak_gflops(bool f64, double seconds) {
  // Best of three, as a GEMM row is a median of many calls on a warm core.
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    const double g = f64 ? run<double>(seconds) : run<float>(seconds);
    best = g > best ? g : best;
  }
  return best;
}

double bf16_dot_peak_gflops(double seconds) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) return 0;
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    // Lanes counted as float32 (the accumulator); 2 products and 2 adds per lane.
    const double g = timed(loop_bf16, 64, 4.0, seconds);
    best = g > best ? g : best;
  }
  return best;
#else
  (void)seconds;
  return 0;
#endif
}

const char* fma_peak_isa() {
  const int bytes = width_bytes();
  return bytes == 64 ? "AVX-512" : bytes == 32 ? "AVX2+FMA" : "128-bit";
}

}  // namespace dtensor::bench
