// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind every random op. Header-only and __host__ __device__, so CPU
// and CUDA kernels compute the same bits.
//
// The Philox stream of a generator with 64-bit `seed` is the sequence of 32-bit words
//   word w = lane (w % 4) of philox4x32_10(counter = {lo32(w / 4), hi32(w / 4), 0, 0},
//                                          key     = {lo32(seed), hi32(seed)}).
// A random op with base offset `o` (in words) gives the element with global row-major linear
// index i the words [o + i * W, o + (i + 1) * W); W per distribution is in rng/distributions.h.
// Word indices wrap modulo 2^64.
#pragma once

#include <cstdint>

#include "dtensor/tensor/macros.h"

namespace dtensor {

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;  // round multipliers
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, sqrt 3)
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;
inline constexpr int kPhiloxRounds = 10;

// Four 32-bit words: a Philox counter or output block.
struct PhiloxBlock {
  uint32_t v[4];
};

namespace detail {

DT_HOST_DEVICE DT_FORCE_INLINE uint32_t philox_mulhi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

// One Philox round: two 32x32->64 multiplications, then mix with the round key.
DT_HOST_DEVICE DT_FORCE_INLINE void philox_round(uint32_t& c0, uint32_t& c1, uint32_t& c2,
                                                 uint32_t& c3, uint32_t k0, uint32_t k1) {
  const uint32_t hi0 = philox_mulhi(kPhiloxM0, c0);
  const uint32_t lo0 = kPhiloxM0 * c0;
  const uint32_t hi1 = philox_mulhi(kPhiloxM1, c2);
  const uint32_t lo1 = kPhiloxM1 * c2;
  c0 = hi1 ^ c1 ^ k0;
  c1 = lo1;
  c2 = hi0 ^ c3 ^ k1;
  c3 = lo0;
}

}  // namespace detail

// Philox4x32 with 10 rounds of counter `ctr` under key {k0, k1} (Random123's philox4x32_10).
DT_HOST_DEVICE inline PhiloxBlock philox4x32_10(PhiloxBlock ctr, uint32_t k0, uint32_t k1) {
  uint32_t c0 = ctr.v[0], c1 = ctr.v[1], c2 = ctr.v[2], c3 = ctr.v[3];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    detail::philox_round(c0, c1, c2, c3, k0, k1);
  }
  return PhiloxBlock{{c0, c1, c2, c3}};
}

// The Philox block number `block` of the stream of `seed`: words [4 * block, 4 * block + 4).
DT_HOST_DEVICE DT_FORCE_INLINE PhiloxBlock philox_stream_block(uint64_t seed, uint64_t block) {
  return philox4x32_10(
      PhiloxBlock{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Word `w` of the stream of `seed` (one full Philox evaluation; use for references and tests).
DT_HOST_DEVICE inline uint32_t philox_word(uint64_t seed, uint64_t w) {
  return philox_stream_block(seed, w >> 2).v[w & 3];
}

// Words [first, first + n) of the stream of `seed` into out[0..n), n <= 4 (at most two blocks).
DT_HOST_DEVICE inline void philox_words(uint64_t seed, uint64_t first, int n, uint32_t* out) {
  const uint64_t b = first >> 2;
  const int lane = static_cast<int>(first & 3);
  PhiloxBlock x = philox_stream_block(seed, b);
  if (lane + n <= 4) {
    for (int j = 0; j < n; ++j) out[j] = x.v[lane + j];
    return;
  }
  PhiloxBlock y = philox_stream_block(seed, (b + 1) & ((uint64_t{1} << 62) - 1));  // wraps
  for (int j = 0; j < n; ++j) out[j] = lane + j < 4 ? x.v[lane + j] : y.v[lane + j - 4];
}

}  // namespace dtensor
