// Half / BFloat16 conversions against known bit patterns and an independent rounding
// reference computed in double with nearbyint (round-half-to-even).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/half.h"

using namespace dtensor;

namespace {

uint16_t hbits(float f) {
  return Half(f).bits;
}
uint16_t bbits(float f) {
  return BFloat16(f).bits;
}
float from_fbits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Decodes binary16 bits with ldexp (independent of half.h).
double ref_half_value(uint16_t h) {
  const int sign = h >> 15;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else {
    v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  }
  return sign ? -v : v;
}

// The value of the nearest representable number with `mant_bits` fraction bits, minimum
// normal exponent `emin` and overflow threshold `overflow` (ties to even); inf when it
// overflows.
double ref_round(double v, int mant_bits, int emin, double overflow) {
  if (std::fabs(v) >= overflow) return v > 0 ? INFINITY : -INFINITY;
  if (v == 0) return v;
  int e = std::ilogb(v);
  if (e < emin) e = emin;
  const double q = std::ldexp(1.0, e - mant_bits);
  return std::nearbyint(v / q) * q;
}

}  // namespace

TEST_CASE("half: known bit patterns", "[half]") {
  CHECK(hbits(0.0f) == 0x0000);
  CHECK(hbits(-0.0f) == 0x8000);
  CHECK(hbits(1.0f) == 0x3c00);
  CHECK(hbits(-2.0f) == 0xc000);
  CHECK(hbits(0.5f) == 0x3800);
  CHECK(hbits(0.1f) == 0x2e66);
  CHECK(hbits(65504.0f) == 0x7bff);  // max finite
  CHECK(hbits(65519.0f) == 0x7bff);  // below the rounding boundary
  CHECK(hbits(65520.0f) == 0x7c00);  // rounds to inf
  CHECK(hbits(1e10f) == 0x7c00);
  CHECK(hbits(-1e10f) == 0xfc00);
  CHECK(hbits(INFINITY) == 0x7c00);
  CHECK(hbits(-INFINITY) == 0xfc00);
  CHECK(hbits(std::ldexp(1.0f, -14)) == 0x0400);     // min normal
  CHECK(hbits(std::ldexp(1.0f, -24)) == 0x0001);     // min subnormal
  CHECK(hbits(std::ldexp(1023.0f, -24)) == 0x03ff);  // max subnormal
  CHECK(hbits(std::ldexp(1.0f, -25)) == 0x0000);     // tie between 0 and 1 quantum: even (0)
  CHECK(hbits(std::ldexp(3.0f, -25)) == 0x0002);     // tie between 1 and 2 quanta: even (2)
  CHECK(hbits(std::ldexp(1.0f, -26)) == 0x0000);
  CHECK(hbits(-std::ldexp(1.0f, -24)) == 0x8001);
  CHECK(hbits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie: down to even
  CHECK(hbits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie: up to even
  CHECK(hbits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);  // above tie
  // NaN stays NaN (exponent all ones, mantissa nonzero), sign kept.
  const uint16_t n = hbits(std::numeric_limits<float>::quiet_NaN());
  CHECK((n & 0x7c00) == 0x7c00);
  CHECK((n & 0x03ff) != 0);
  const uint16_t sn = hbits(from_fbits(0x7f800001u));  // signalling NaN with a low payload
  CHECK((sn & 0x7c00) == 0x7c00);
  CHECK((sn & 0x03ff) != 0);
}

TEST_CASE("half: every bit pattern decodes exactly and round-trips", "[half]") {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = Half::from_bits(h);
    const double ref = ref_half_value(h);
    if (std::isnan(ref)) {
      REQUIRE(std::isnan(f));
      REQUIRE(std::isnan(static_cast<float>(Half(f))));
      continue;
    }
    REQUIRE(static_cast<double>(f) == ref);
    REQUIRE(Half(f).bits == h);
  }
}

TEST_CASE("half: random floats round to nearest even", "[half]") {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_int_distribution<int> exp(100, 145);  // around the half range incl. subnormals
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    if (i % 2 == 0) u = (u & 0x807fffffu) | (static_cast<uint32_t>(exp(rng)) << 23);
    const float f = from_fbits(u);
    if (std::isnan(f)) continue;
    const double ref = ref_round(f, 10, -14, 65520.0);
    const double got = ref_half_value(hbits(f));
    INFO("float bits " << std::hex << u);
    REQUIRE(got == ref);
    REQUIRE(std::signbit(got) == std::signbit(f));
  }
}

TEST_CASE("bfloat16: known bit patterns", "[half]") {
  CHECK(bbits(0.0f) == 0x0000);
  CHECK(bbits(-0.0f) == 0x8000);
  CHECK(bbits(1.0f) == 0x3f80);
  CHECK(bbits(-2.0f) == 0xc000);
  CHECK(bbits(3.0f) == 0x4040);
  CHECK(bbits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);      // tie: down to even
  CHECK(bbits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // tie: up to even
  CHECK(bbits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  CHECK(bbits(INFINITY) == 0x7f80);
  CHECK(bbits(-INFINITY) == 0xff80);
  CHECK(bbits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to inf
  CHECK(bbits(from_fbits(0x7f7f0000u)) == 0x7f7f);            // max finite bf16
  CHECK(bbits(from_fbits(0x00010000u)) == 0x0001);            // min subnormal
  CHECK(bbits(from_fbits(0x00008000u)) == 0x0000);            // tie to even (0)
  CHECK(bbits(from_fbits(0x00018000u)) == 0x0002);            // tie to even (2)
  const uint16_t n = bbits(std::numeric_limits<float>::quiet_NaN());
  CHECK((n & 0x7f80) == 0x7f80);
  CHECK((n & 0x007f) != 0);
  // A NaN whose payload lives only in the low 16 bits must not become inf.
  const uint16_t sn = bbits(from_fbits(0x7f800001u));
  CHECK((sn & 0x7f80) == 0x7f80);
  CHECK((sn & 0x007f) != 0);
}

TEST_CASE("bfloat16: every bit pattern round-trips, random floats round to nearest even",
          "[half]") {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = BFloat16::from_bits(static_cast<uint16_t>(b));
    uint32_t u;
    std::memcpy(&u, &f, 4);
    REQUIRE(u == b << 16);
    if (!std::isnan(f)) REQUIRE(BFloat16(f).bits == b);
  }
  std::mt19937 rng(777);
  std::uniform_int_distribution<uint32_t> bits;
  const double overflow = std::ldexp(2.0 - std::ldexp(1.0, -8), 127);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = bits(rng);
    const float f = from_fbits(u);
    if (std::isnan(f)) continue;
    const double ref = ref_round(f, 7, -126, overflow);
    const double got = static_cast<float>(BFloat16::from_bits(bbits(f)));
    INFO("float bits " << std::hex << u);
    REQUIRE(got == ref);
  }
}

TEST_CASE("convert: element conversions", "[half]") {
  using detail::convert;
  CHECK(convert<bool>(0.5f) == true);
  CHECK(convert<bool>(0.0) == false);
  CHECK(convert<bool>(-0.0) == false);
  CHECK(convert<bool>(std::numeric_limits<double>::quiet_NaN()) == true);
  CHECK(convert<bool>(Half(0.0f)) == false);
  CHECK(convert<bool>(BFloat16(-3.0f)) == true);
  CHECK(convert<bool>(int64_t{7}) == true);
  CHECK(convert<int32_t>(true) == 1);
  CHECK(convert<float>(true) == 1.0f);
  CHECK(convert<Half>(true).bits == 0x3c00);
  CHECK(convert<int32_t>(-2.7) == -2);  // truncation toward zero
  CHECK(convert<int64_t>(Half(3.75f)) == 3);
  CHECK(convert<BFloat16>(Half(1.5f)).bits == 0x3fc0);
  CHECK(convert<Half>(BFloat16(2.0f)).bits == 0x4000);
  CHECK(convert<double>(BFloat16::from_bits(0x3f81)) == 1.0078125);
  CHECK(convert<Half>(int64_t{65504}).bits == 0x7bff);
  CHECK(convert<Half>(70000.0).bits == 0x7c00);
}
