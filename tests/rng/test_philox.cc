// Philox4x32-10 known answers (Random123 kat_vectors) and the word stream mapping.
#include <catch2/catch.hpp>
#include <vector>

#include "dtensor/rng/detail/fill_internal.h"
#include "dtensor/rng/philox.h"

using namespace dtensor;

namespace {

struct Kat {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t expected[4];
};

// Random123 kat_vectors, "philox4x32 10" lines: counter, key, expected output.
const Kat kKats[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

// Textbook Philox4x32-10 written out independently (64-bit products, explicit key schedule).
PhiloxBlock reference_philox(const uint32_t c_in[4], const uint32_t k_in[2]) {
  uint32_t c[4] = {c_in[0], c_in[1], c_in[2], c_in[3]};
  uint32_t k[2] = {k_in[0], k_in[1]};
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t{0xD2511F53} * c[0];
    const uint64_t p1 = uint64_t{0xCD9E8D57} * c[2];
    const uint32_t n[4] = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1),
                           uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    for (int i = 0; i < 4; ++i) c[i] = n[i];
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return PhiloxBlock{{c[0], c[1], c[2], c[3]}};
}

}  // namespace

TEST_CASE("philox4x32_10 matches the Random123 known-answer vectors", "[rng][philox]") {
  for (const Kat& kat : kKats) {
    const PhiloxBlock out = philox4x32_10(
        PhiloxBlock{{kat.ctr[0], kat.ctr[1], kat.ctr[2], kat.ctr[3]}}, kat.key[0], kat.key[1]);
    for (int i = 0; i < 4; ++i) CHECK(out.v[i] == kat.expected[i]);
    const PhiloxBlock ref = reference_philox(kat.ctr, kat.key);
    for (int i = 0; i < 4; ++i) CHECK(ref.v[i] == kat.expected[i]);
  }
}

TEST_CASE("philox stream words follow the documented counter/key layout", "[rng][philox]") {
  const uint64_t seed = 0x0123456789abcdefull;
  const uint32_t key[2] = {0x89abcdefu, 0x01234567u};
  for (uint64_t w : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4}, uint64_t{1001},
                     (uint64_t{5} << 34) + 2, ~uint64_t{0}}) {
    const uint64_t b = w / 4;
    const uint32_t ctr[4] = {uint32_t(b), uint32_t(b >> 32), 0, 0};
    CHECK(philox_word(seed, w) == reference_philox(ctr, key).v[w % 4]);
  }
  // philox_words across a block boundary
  uint32_t got[4];
  philox_words(seed, 6, 4, got);
  for (int j = 0; j < 4; ++j) CHECK(got[j] == philox_word(seed, 6 + j));
  philox_words(seed, 9, 2, got);
  for (int j = 0; j < 2; ++j) CHECK(got[j] == philox_word(seed, 9 + j));
  // The last words of the 2^64-word stream are followed by word 0.
  philox_words(seed, ~uint64_t{0} - 1, 4, got);
  CHECK(got[0] == philox_word(seed, ~uint64_t{0} - 1));
  CHECK(got[1] == philox_word(seed, ~uint64_t{0}));
  CHECK(got[2] == philox_word(seed, 0));
  CHECK(got[3] == philox_word(seed, 1));
}

TEST_CASE("the vectorised block fillers equal the scalar generator", "[rng][philox]") {
  const uint64_t seed = 42;
  for (uint64_t b0 : {uint64_t{0}, uint64_t{7}, (uint64_t{1} << 32) - 5, (uint64_t{1} << 62) - 9}) {
    for (int64_t n : {0, 1, 15, 16, 17, 31, 32, 33, 100}) {
      for (auto* fill : {&detail::philox_fill_blocks, &detail::philox_fill_blocks_generic}) {
        std::vector<uint32_t> buf(4 * n + 1, 0xdeadbeefu);
        fill(seed, b0, n, buf.data());
        for (int64_t j = 0; j < n; ++j) {
          const PhiloxBlock x = philox_stream_block(seed, (b0 + j) & ((uint64_t{1} << 62) - 1));
          for (int q = 0; q < 4; ++q) REQUIRE(buf[4 * j + q] == x.v[q]);
        }
        CHECK(buf[4 * n] == 0xdeadbeefu);  // nothing written past the end
      }
    }
  }
}
