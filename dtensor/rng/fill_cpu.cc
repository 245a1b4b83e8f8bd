// CPU generation: Philox blocks 16 counters at a time (AVX2 intrinsics when the CPU has them,
// else plain arrays that the compiler vectorises), then the per-element formulas of
// detail/distributions_impl.h, over runs of consecutive global indices, split over threads by
// element range for large tensors.
#include <algorithm>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "dtensor/rng/detail/distributions_impl.h"
#include "dtensor/rng/detail/fill_internal.h"
#include "dtensor/rng/philox.h"

namespace dtensor::detail {

namespace {

constexpr int kLanes = 16;
constexpr uint64_t kBlockMask = (uint64_t{1} << 62) - 1;

// Portable version: plain arrays of 16 counters; GCC vectorises the lane loops (SSE2).
void philox_fill_blocks_generic_impl(uint64_t seed, uint64_t b0, int64_t nblocks, uint32_t* out) {
  const uint32_t key0 = static_cast<uint32_t>(seed);
  const uint32_t key1 = static_cast<uint32_t>(seed >> 32);
  int64_t j = 0;
  for (; j + kLanes <= nblocks; j += kLanes) {
    uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t b = (b0 + static_cast<uint64_t>(j + l)) & kBlockMask;
      c0[l] = static_cast<uint32_t>(b);
      c1[l] = static_cast<uint32_t>(b >> 32);
      c2[l] = 0;
      c3[l] = 0;
    }
    uint32_t k0 = key0, k1 = key1;
    for (int r = 0; r < kPhiloxRounds; ++r) {
      for (int l = 0; l < kLanes; ++l) {
        const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c0[l];
        const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c2[l];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
        c1[l] = static_cast<uint32_t>(p1);
        c3[l] = static_cast<uint32_t>(p0);
        c0[l] = n0;
        c2[l] = n2;
      }
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    uint32_t* o = out + 4 * j;
    for (int l = 0; l < kLanes; ++l) {
      o[4 * l + 0] = c0[l];
      o[4 * l + 1] = c1[l];
      o[4 * l + 2] = c2[l];
      o[4 * l + 3] = c3[l];
    }
  }
  for (; j < nblocks; ++j) {
    const PhiloxBlock x = philox_stream_block(seed, (b0 + static_cast<uint64_t>(j)) & kBlockMask);
    for (int q = 0; q < 4; ++q) out[4 * j + q] = x.v[q];
  }
}

#if defined(__x86_64__)
// AVX2: 2 x 8 counters per iteration in registers. The 32x32->64 products of the even and odd
// lanes come from two _mm256_mul_epu32 and are blended back into (hi, lo) vectors.
__attribute__((target("avx2"))) inline void mulhilo8(__m256i a, __m256i m, __m256i& hi,
                                                     __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// Transposes 4 vectors of 8 lanes (word q of blocks 0..7) into 8 blocks of 4 words at o.
__attribute__((target("avx2"))) inline void store8_avx2(__m256i c0, __m256i c1, __m256i c2,
                                                        __m256i c3, uint32_t* o) {
  const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpacklo_epi32(c2, c3);
  const __m256i t2 = _mm256_unpackhi_epi32(c0, c1), t3 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t1), u1 = _mm256_unpackhi_epi64(t0, t1);
  const __m256i u2 = _mm256_unpacklo_epi64(t2, t3), u3 = _mm256_unpackhi_epi64(t2, t3);
  __m256i* v = reinterpret_cast<__m256i*>(o);
  _mm256_storeu_si256(v + 0, _mm256_permute2x128_si256(u0, u1, 0x20));
  _mm256_storeu_si256(v + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
  _mm256_storeu_si256(v + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
  _mm256_storeu_si256(v + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
}

__attribute__((target("avx2"))) void philox_fill_blocks_avx2(uint64_t seed, uint64_t b0,
                                                             int64_t nblocks, uint32_t* out) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxM1));
  int64_t j = 0;
  for (; j + 16 <= nblocks; j += 16) {
    alignas(32) uint32_t lo32[16], hi32[16];
    for (int l = 0; l < 16; ++l) {
      const uint64_t b = (b0 + static_cast<uint64_t>(j + l)) & kBlockMask;
      lo32[l] = static_cast<uint32_t>(b);
      hi32[l] = static_cast<uint32_t>(b >> 32);
    }
    __m256i a0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo32));
    __m256i a1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi32));
    __m256i a2 = _mm256_setzero_si256(), a3 = _mm256_setzero_si256();
    __m256i b0v = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo32 + 8));
    __m256i b1v = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi32 + 8));
    __m256i b2v = _mm256_setzero_si256(), b3v = _mm256_setzero_si256();
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < kPhiloxRounds; ++r) {
      const __m256i kk0 = _mm256_set1_epi32(static_cast<int>(k0));
      const __m256i kk1 = _mm256_set1_epi32(static_cast<int>(k1));
      __m256i hi0, lo0, hi1, lo1, hi2, lo2, hi3, lo3;
      mulhilo8(a0, m0, hi0, lo0);
      mulhilo8(a2, m1, hi1, lo1);
      mulhilo8(b0v, m0, hi2, lo2);
      mulhilo8(b2v, m1, hi3, lo3);
      a0 = _mm256_xor_si256(_mm256_xor_si256(hi1, a1), kk0);
      a2 = _mm256_xor_si256(_mm256_xor_si256(hi0, a3), kk1);
      a1 = lo1;
      a3 = lo0;
      b0v = _mm256_xor_si256(_mm256_xor_si256(hi3, b1v), kk0);
      b2v = _mm256_xor_si256(_mm256_xor_si256(hi2, b3v), kk1);
      b1v = lo3;
      b3v = lo2;
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    store8_avx2(a0, a1, a2, a3, out + 4 * j);
    store8_avx2(b0v, b1v, b2v, b3v, out + 4 * j + 32);
  }
  if (j < nblocks)
    philox_fill_blocks_generic_impl(seed, b0 + static_cast<uint64_t>(j), nblocks - j, out + 4 * j);
}

bool have_avx2() {
  static const bool have = [] {
    __builtin_cpu_init();  // may run before libgcc's own constructor
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return have;
}
#endif

DT_FORCE_INLINE void philox_fill_blocks_impl(uint64_t seed, uint64_t b0, int64_t nblocks,
                                             uint32_t* out) {
#if defined(__x86_64__)
  if (have_avx2()) return philox_fill_blocks_avx2(seed, b0, nblocks, out);
#endif
  philox_fill_blocks_generic_impl(seed, b0, nblocks, out);
}

constexpr int64_t kChunk = 1024;  // elements generated per Philox batch (stack buffer)

// Under ThreadSanitizer (scripts/tsan.sh) gen_run is compiled once, for the baseline: GCC 12
// instruments target_clones' ifunc resolver, which the dynamic loader runs while relocating the
// library, before TSan's runtime is initialised, so every process that loaded it died in libtsan
// (SIGSEGV in _dl_relocate_object). Both clones give the same bits, so nothing else changes.
#if defined(__SANITIZE_THREAD__)
#define DTENSOR_GEN_RUN_CLONES
#else
#define DTENSOR_GEN_RUN_CLONES __attribute__((target_clones("avx2", "default")))
#endif

// Elements with global indices g, g + 1, ..., g + n - 1 into dst[0], dst[stride], ...
// Compiled twice (AVX2 and baseline); both give the same bits (no fma, no reassociation).
template <typename T, class Op>
DTENSOR_GEN_RUN_CLONES void gen_run(const Op& op, uint64_t seed, uint64_t offset, uint64_t g,
                                    int64_t n, T* dst, int64_t stride) {
  constexpr int kW = Op::kWords;
  alignas(64) uint32_t buf[kChunk * kW + 8];
  while (n > 0) {
    const int64_t m = std::min(n, kChunk);
    const uint64_t ws = offset + g * kW;
    const int lane = static_cast<int>(ws & 3);
    const int64_t nb = (lane + m * kW + 3) / 4;
    philox_fill_blocks_impl(seed, ws >> 2, nb, buf);
    const uint32_t* w = buf + lane;
    if (stride == 1) {
      for (int64_t i = 0; i < m; ++i) dst[i] = op(w + i * kW);
    } else {
      for (int64_t i = 0; i < m; ++i) dst[i * stride] = op(w + i * kW);
    }
    g += static_cast<uint64_t>(m);
    n -= m;
    dst += m * stride;
  }
}

// Calls f(first global index, length, operand offsets) for each run of consecutive global
// indices among block elements [e0, e1); runs never cross the last (coalesced) dim.
template <class F>
void for_each_run(const BlockGeometry& g, int64_t e0, int64_t e1, F&& f) {
  const int nd = static_cast<int>(g.size.size());
  Shape idx(nd, 0);
  int64_t rem = e0;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % g.size[d];
    rem /= g.size[d];
  }
  const bool rows = g.gstride[nd - 1] == 1;
  int64_t e = e0;
  while (e < e1) {
    uint64_t gi = g.gbase;
    int64_t off[3] = {0, 0, 0};
    for (int d = 0; d < nd; ++d) {
      gi += static_cast<uint64_t>(idx[d] * g.gstride[d]);
      for (int k = 0; k < g.nops; ++k) off[k] += idx[d] * g.stride[k][d];
    }
    const int64_t len = rows ? std::min(g.size[nd - 1] - idx[nd - 1], e1 - e) : 1;
    f(gi, len, off);
    e += len;
    idx[nd - 1] += len;
    for (int d = nd - 1; d > 0 && idx[d] >= g.size[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

constexpr int64_t kParallelMin = int64_t{1} << 16;

// f(e0, e1) over [0, n), in rng_num_threads() ranges when n is large.
template <class F>
void parallel_elements(int64_t n, F&& f) {
  int64_t nt = rng_num_threads();
  nt = std::min<int64_t>(nt, n / (kParallelMin / 2));
  if (nt <= 1) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t per = ((n + nt - 1) / nt + 63) / 64 * 64;
  std::vector<std::thread> threads;
  threads.reserve(nt - 1);
  for (int64_t t = 1; t < nt; ++t) {
    const int64_t b = std::min(n, t * per), e = std::min(n, (t + 1) * per);
    if (b < e) threads.emplace_back([&f, b, e] { f(b, e); });
  }
  f(int64_t{0}, std::min(n, per));
  for (auto& th : threads) th.join();
}

template <typename T, class Op>
void fill_with(const Op& op, const Tensor& out, uint64_t seed, uint64_t offset,
               const BlockGeometry& g) {
  T* base = static_cast<T*>(out.data_ptr());
  const int64_t last = g.stride[0][g.size.size() - 1];
  parallel_elements(g.numel, [&](int64_t e0, int64_t e1) {
    for_each_run(g, e0, e1, [&](uint64_t gi, int64_t len, const int64_t* off) {
      gen_run<T>(op, seed, offset, gi, len, base + off[0], last);
    });
  });
}

template <typename T>
void fill_typed(const Tensor& out, const RandomSpec& s, uint64_t seed, uint64_t offset,
                const BlockGeometry& g) {
  using C = compute_t<T>;
  constexpr bool kFloating = !std::is_integral_v<T>;
  switch (s.kind) {
    case RandomKind::kUniform:
      if constexpr (kFloating) {
        return fill_with<T>(UniformOp<T>{static_cast<C>(s.low), static_cast<C>(s.high - s.low)},
                            out, seed, offset, g);
      }
      break;
    case RandomKind::kNormal:
      if constexpr (kFloating) {
        return fill_with<T>(NormalOp<T>{static_cast<C>(s.mean), static_cast<C>(s.stddev)}, out,
                            seed, offset, g);
      }
      break;
    case RandomKind::kBernoulli:
      return fill_with<T>(BernoulliOp<T>{bernoulli_threshold(s.p)}, out, seed, offset, g);
    case RandomKind::kRandint:
      if constexpr (!std::is_same_v<T, bool>) {
        return fill_with<T>(RandintOp<T>{s.int_low, static_cast<uint64_t>(s.int_high) -
                                                        static_cast<uint64_t>(s.int_low)},
                            out, seed, offset, g);
      }
      break;
    case RandomKind::kDropoutMask:
      if constexpr (kFloating) {
        const double scale = s.p < 1.0 ? 1.0 / (1.0 - s.p) : 0.0;
        return fill_with<T>(DropoutMaskOp<T>{bernoulli_threshold(s.p), static_cast<C>(scale)}, out,
                            seed, offset, g);
      }
      break;
  }
  DT_FAIL("[fill_random] %s does not support dtype %s", random_kind_name(s.kind),
          dtype_name(s.dtype));
}

template <typename T>
void dropout_typed(const Tensor& input, const Tensor& out, const Tensor& mask, double p,
                   uint64_t seed, uint64_t offset, const BlockGeometry& g) {
  using C = compute_t<T>;
  const uint64_t thr = bernoulli_threshold(p);
  const C scale = static_cast<C>(p < 1.0 ? 1.0 / (1.0 - p) : 0.0);
  const T* in = static_cast<const T*>(input.data_ptr());
  T* o = static_cast<T*>(out.data_ptr());
  bool* mk = mask.defined() ? static_cast<bool*>(mask.data_ptr()) : nullptr;
  const size_t nd = g.size.size();
  const int64_t si = g.stride[0][nd - 1], so = g.stride[1][nd - 1];
  const int64_t sm = mask.defined() ? g.stride[2][nd - 1] : 0;
  parallel_elements(g.numel, [&](int64_t e0, int64_t e1) {
    alignas(64) uint32_t buf[kChunk + 8];
    for_each_run(g, e0, e1, [&](uint64_t gi, int64_t len, const int64_t* off) {
      const T* a = in + off[0];
      T* b = o + off[1];
      bool* c = mk ? mk + off[2] : nullptr;
      while (len > 0) {
        const int64_t m = std::min(len, kChunk);
        const uint64_t ws = offset + gi;
        const int lane = static_cast<int>(ws & 3);
        philox_fill_blocks_impl(seed, ws >> 2, (lane + m + 3) / 4, buf);
        const uint32_t* w = buf + lane;
        for (int64_t i = 0; i < m; ++i) {
          const bool keep = dropout_keep(w[i], thr);
          const C x = static_cast<C>(a[i * si]);
          b[i * so] = T(keep ? x * scale : C(0));
          if (c) c[i * sm] = keep;
        }
        gi += static_cast<uint64_t>(m);
        len -= m;
        a += m * si;
        b += m * so;
        if (c) c += m * sm;
      }
    });
  });
}

}  // namespace

void philox_fill_blocks(uint64_t seed, uint64_t b0, int64_t nblocks, uint32_t* out) {
  philox_fill_blocks_impl(seed, b0, nblocks, out);
}

void philox_fill_blocks_generic(uint64_t seed, uint64_t b0, int64_t nblocks, uint32_t* out) {
  philox_fill_blocks_generic_impl(seed, b0, nblocks, out);
}

void fill_random_cpu(const Tensor& out, const RandomSpec& spec, uint64_t seed, uint64_t offset,
                     const BlockGeometry& g) {
  if (g.numel == 0) return;
  dispatch_dtype(spec.dtype, [&]<typename T>() { fill_typed<T>(out, spec, seed, offset, g); });
}

void dropout_cpu(const Tensor& input, const Tensor& out, const Tensor& mask, double p,
                 uint64_t seed, uint64_t offset, const BlockGeometry& g) {
  if (g.numel == 0) return;
  dispatch_floating(input.dtype(), "dropout",
                    [&]<typename T>() { dropout_typed<T>(input, out, mask, p, seed, offset, g); });
}

}  // namespace dtensor::detail
