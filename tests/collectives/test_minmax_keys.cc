// The NCCL backend's NaN-propagating max / min keys (nccl/detail/minmax_keys.h), checked on the
// CPU: reducing keys by integer max / min and turning the result back must give what the MPI
// backend's MaxF / MinF and the single-device reductions give: NaN when either side is NaN,
// else the larger (smaller) value. Every 16-bit pattern against a spread of others; float32 and
// float64 over special and random values. The CUDA kernels apply exactly these functions.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dtensor/collectives/nccl/detail/minmax_keys.h"
#include "dtensor/tensor/half.h"

namespace dtensor::test {
namespace {

using detail::minmax_bits;
using detail::minmax_key;

// The reduced value of a and b through the keys, as an integer max / min reduces them.
template <typename Key, typename Bits>
Bits through_keys(Bits a, Bits b, Bits inf_bits, bool is_max) {
  const Key ka = minmax_key<Key>(a, inf_bits, is_max);
  const Key kb = minmax_key<Key>(b, inf_bits, is_max);
  return minmax_bits<Bits>(is_max ? (ka > kb ? ka : kb) : (ka < kb ? ka : kb));
}

// Checks one pair against the reference rule; `decode` turns bits into a double.
template <typename Key, typename Bits, typename Decode>
void check_pair(Bits a, Bits b, Bits inf_bits, Decode decode) {
  const double x = decode(a), y = decode(b);
  for (bool is_max : {true, false}) {
    const double got = decode(through_keys<Key>(a, b, inf_bits, is_max));
    if (std::isnan(x) || std::isnan(y)) {
      if (!std::isnan(got))
        FAIL_CHECK("is_max " << is_max << ": " << x << ", " << y << " -> " << got);
    } else {
      const double want = is_max ? std::max(x, y) : std::min(x, y);
      if (got != want) FAIL_CHECK("is_max " << is_max << ": " << x << ", " << y << " -> " << got);
    }
  }
}

template <typename Bits>
Bits bits_of(auto v) {
  Bits b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

TEST_CASE("max / min keys: every 16-bit pattern against a spread of others",
          "[collectives][nccl]") {
  struct Case {
    uint16_t inf;
    float (*decode)(uint16_t);
  };
  const Case cases[] = {
      {detail::kInfBitsHalf, [](uint16_t b) { return detail::half_bits_to_float(b); }},
      {detail::kInfBitsBFloat16, [](uint16_t b) { return detail::bf16_bits_to_float(b); }}};
  for (const Case& c : cases) {
    const auto decode = [&](uint16_t b) { return static_cast<double>(c.decode(b)); };
    for (uint32_t a = 0; a < 65536; ++a) {
      // Round trip: every non-NaN pattern comes back as itself (-0 included).
      const auto ua = static_cast<uint16_t>(a);
      if (!std::isnan(decode(ua))) {
        REQUIRE(minmax_bits<uint16_t>(minmax_key<int32_t>(ua, c.inf, true)) == ua);
      }
      for (uint32_t b = a % 251; b < 65536; b += 251) {
        check_pair<int32_t>(ua, static_cast<uint16_t>(b), c.inf, decode);
      }
    }
  }
}

template <typename T, typename Bits, typename Key>
void check_wide(Bits inf_bits) {
  using L = std::numeric_limits<T>;
  std::vector<T> v = {T(0),
                      -T(0),
                      T(1),
                      T(-1),
                      L::infinity(),
                      -L::infinity(),
                      L::quiet_NaN(),
                      -L::quiet_NaN(),
                      L::max(),
                      L::lowest(),
                      L::min(),
                      -L::min(),
                      L::denorm_min(),
                      -L::denorm_min(),
                      T(2.5)};
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<T> dist(-1e6, 1e6);
  for (int i = 0; i < 200; ++i) v.push_back(dist(gen));
  Bits signalling = bits_of<Bits>(L::quiet_NaN()) ^ (Bits(1) << 3);  // a NaN with a payload
  const auto decode = [](Bits b) {
    T t;
    std::memcpy(&t, &b, sizeof t);
    return static_cast<double>(t);
  };
  std::vector<Bits> bits;
  for (T t : v) bits.push_back(bits_of<Bits>(t));
  bits.push_back(signalling);
  bits.push_back(static_cast<Bits>(signalling | (Bits(1) << (sizeof(Bits) * 8 - 1))));
  for (Bits a : bits) {
    if (!std::isnan(decode(a)))
      REQUIRE(minmax_bits<Bits>(minmax_key<Key>(a, inf_bits, false)) == a);
    for (Bits b : bits) check_pair<Key>(a, b, inf_bits, decode);
  }
}

TEST_CASE("max / min keys: float32 and float64 special and random values", "[collectives][nccl]") {
  check_wide<float, uint32_t, int32_t>(detail::kInfBitsFloat);
  check_wide<double, uint64_t, int64_t>(detail::kInfBitsDouble);
}

}  // namespace
}  // namespace dtensor::test
