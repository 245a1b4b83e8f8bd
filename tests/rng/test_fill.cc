// fill_random: the element mapping (against direct Philox recomputation) and block
// invariance (a block generated alone equals the same block cut from the full tensor).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "dtensor/ops/threads.h"
#include "dtensor/rng/detail/distributions_impl.h"
#include "dtensor/rng/distributions.h"
#include "dtensor/rng/philox.h"
#include "dtensor/tensor/creation.h"

using namespace dtensor;

namespace {

constexpr uint64_t kSeed = 0x5eed5eed12345678ull;

std::vector<RandomSpec> all_specs() {
  std::vector<RandomSpec> s;
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    s.push_back(RandomSpec::uniform(d));
    s.push_back(RandomSpec::uniform(d, -3.0, 5.0));
    s.push_back(RandomSpec::normal(d, 1.0, 2.0));
    s.push_back(RandomSpec::dropout_mask(d, 0.3));
    s.push_back(RandomSpec::randint(d, -5, 17));
    s.push_back(RandomSpec::bernoulli(d, 0.25));
  }
  s.push_back(RandomSpec::bernoulli(kBool, 0.6));
  s.push_back(RandomSpec::bernoulli(kInt32, 0.6));
  s.push_back(RandomSpec::randint(kInt32, -1000, 1000));
  s.push_back(RandomSpec::randint(kInt64, int64_t{-1} << 40, int64_t{1} << 50));
  return s;
}

std::string name(const RandomSpec& s) {
  return std::string(random_kind_name(s.kind)) + "/" + std::string(dtype_name(s.dtype));
}

Tensor generate_full(const RandomSpec& spec, IntSpan shape, uint64_t offset) {
  Tensor t = empty(shape, spec.dtype);
  const Shape zero(shape.size(), 0);
  fill_random(t, spec, kSeed, offset, shape, zero);
  return t;
}

Tensor cut(Tensor t, IntSpan offset, IntSpan sizes) {
  for (size_t d = 0; d < sizes.size(); ++d) t = t.narrow(d, offset[d], sizes[d]);
  return t;
}

void check_block(const RandomSpec& spec, const Tensor& full, IntSpan global, IntSpan offset,
                 IntSpan sizes, uint64_t o) {
  INFO(name(spec) << " global " << shape_str(global) << " block " << shape_str(sizes) << " at "
                  << shape_str(offset));
  Tensor block = empty(sizes, spec.dtype);
  fill_random(block, spec, kSeed, o, global, offset);
  const std::vector<double> want = cut(full, offset, sizes).to_vector<double>();
  const std::vector<double> got = block.to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == want[i]);
}

// The documented formulas, written out in double from raw Philox words.
double reference(const RandomSpec& s, uint64_t o, uint64_t i) {
  auto word = [&](int64_t w, int j) { return philox_word(kSeed, o + i * w + j); };
  auto u64 = [&](uint32_t a, uint32_t b) { return uint64_t(a) | (uint64_t(b) << 32); };
  const double pi2 = 2.0 * M_PI;
  switch (s.kind) {
    case RandomKind::kUniform: {
      double u;
      if (s.dtype == kFloat64)
        u = double(u64(word(2, 0), word(2, 1)) >> 11) / 9007199254740992.0;
      else if (s.dtype == kFloat32)
        u = double(word(1, 0) >> 8) / 16777216.0;
      else if (s.dtype == kFloat16)
        u = double(word(1, 0) >> 21) / 2048.0;
      else
        u = double(word(1, 0) >> 24) / 256.0;
      return s.low + (s.high - s.low) * u;
    }
    case RandomKind::kNormal: {
      if (s.dtype == kFloat64) {
        const double a = double((u64(word(4, 0), word(4, 1)) >> 11) + 1) / 9007199254740992.0;
        const double c = double(u64(word(4, 2), word(4, 3)) >> 11) / 9007199254740992.0;
        return s.mean + s.stddev * std::sqrt(-2.0 * std::log(a)) * std::cos(pi2 * c);
      }
      const double a = double((word(2, 0) >> 8) + 1) / 16777216.0;
      const double c = double(word(2, 1) >> 8) / 16777216.0;
      return s.mean + s.stddev * std::sqrt(-2.0 * std::log(a)) * std::cos(pi2 * c);
    }
    case RandomKind::kBernoulli:
      return double(word(1, 0)) / 4294967296.0 < s.p ? 1.0 : 0.0;
    case RandomKind::kDropoutMask:
      return double(word(1, 0)) / 4294967296.0 >= s.p ? 1.0 / (1.0 - s.p) : 0.0;
    case RandomKind::kRandint: {
      const uint64_t range = uint64_t(s.int_high - s.int_low);
      return double(s.int_low + int64_t(u64(word(2, 0), word(2, 1)) % range));
    }
  }
  return 0.0;
}

double tolerance(const RandomSpec& s, double v) {
  const bool exact = s.kind == RandomKind::kBernoulli || s.kind == RandomKind::kRandint ||
                     (s.kind == RandomKind::kUniform && s.low == 0.0 && s.high == 1.0);
  if (exact) return 0.0;
  const double eps = s.dtype == kFloat64   ? 1e-13
                     : s.dtype == kFloat32 ? 4e-6
                     : s.dtype == kFloat16 ? 1e-3
                                           : 8e-3;
  // Box-Muller near a = 1 loses relative accuracy in float; allow an absolute floor.
  return eps * (std::abs(v) + 1.0) * (s.kind == RandomKind::kNormal ? 4.0 : 1.0);
}

}  // namespace

TEST_CASE("words per element and reservation follow the table", "[rng][fill]") {
  CHECK(words_per_element(RandomSpec::uniform(kFloat32)) == 1);
  CHECK(words_per_element(RandomSpec::uniform(kFloat16)) == 1);
  CHECK(words_per_element(RandomSpec::uniform(kBFloat16)) == 1);
  CHECK(words_per_element(RandomSpec::uniform(kFloat64)) == 2);
  CHECK(words_per_element(RandomSpec::normal(kFloat32)) == 2);
  CHECK(words_per_element(RandomSpec::normal(kBFloat16)) == 2);
  CHECK(words_per_element(RandomSpec::normal(kFloat64)) == 4);
  CHECK(words_per_element(RandomSpec::bernoulli(kBool, 0.5)) == 1);
  CHECK(words_per_element(RandomSpec::dropout_mask(kFloat32, 0.5)) == 1);
  CHECK(words_per_element(RandomSpec::randint(kInt64, 0, 3)) == 2);
  CHECK(words_to_reserve(RandomSpec::uniform(kFloat32), 0) == 0);
  CHECK(words_to_reserve(RandomSpec::uniform(kFloat32), 5) == 8);
  CHECK(words_to_reserve(RandomSpec::uniform(kFloat32), 8) == 8);
  CHECK(words_to_reserve(RandomSpec::normal(kFloat32), 3) == 8);
  CHECK(words_to_reserve(RandomSpec::normal(kFloat64), 3) == 12);
  CHECK(words_to_reserve(RandomSpec::randint(kInt32, 0, 2), 7) == 16);
}

TEST_CASE("element i gets the words o + i W up to o + (i + 1) W", "[rng][fill]") {
  const Shape shape = {7, 9};
  for (const RandomSpec& spec : all_specs()) {
    for (uint64_t o : {uint64_t{0}, uint64_t{6}, uint64_t{1} << 40}) {
      const std::vector<double> got = generate_full(spec, shape, o).to_vector<double>();
      for (uint64_t i : {0, 1, 2, 5, 17, 40, 62}) {
        INFO(name(spec) << " offset " << o << " element " << i);
        const double want = reference(spec, o, i);
        CHECK(std::abs(got[i] - want) <= tolerance(spec, want));
      }
    }
  }
}

TEST_CASE("a block generated alone equals the block cut from the full tensor", "[rng][fill]") {
  const std::vector<Shape> shapes = {{},     {0},       {1},       {13},
                                     {5, 7}, {4, 0, 3}, {3, 5, 4}, {2, 3, 1, 6}};
  const uint64_t o = 12;
  for (const RandomSpec& spec : all_specs()) {
    for (const Shape& global : shapes) {
      const Tensor full = generate_full(spec, global, o);
      const size_t nd = global.size();
      if (nd == 0) {
        check_block(spec, full, global, {}, {}, o);
        continue;
      }
      // Every dim split into 3 (uneven, possibly empty) chunks, others whole.
      for (size_t d = 0; d < nd; ++d) {
        for (int64_t c = 0; c < 3; ++c) {
          const ChunkBounds b = chunk_bounds(global[d], 3, c);
          Shape off(nd, 0), sz(global.begin(), global.end());
          off[d] = b.offset;
          sz[d] = b.size;
          check_block(spec, full, global, off, sz, o);
        }
      }
      // A block cut on every dim at once (2 x 2 x ... grid, uneven).
      Shape off(nd), sz(nd);
      for (size_t d = 0; d < nd; ++d) {
        const ChunkBounds b = chunk_bounds(global[d], 2, 1);
        off[d] = b.offset;
        sz[d] = b.size;
      }
      check_block(spec, full, global, off, sz, o);
      for (size_t d = 0; d < nd; ++d) {
        const ChunkBounds b = chunk_bounds(global[d], 2, 0);
        off[d] = b.offset;
        sz[d] = b.size;
      }
      check_block(spec, full, global, off, sz, o);
    }
  }
}

TEST_CASE("fill_random writes strided outputs element by element", "[rng][fill]") {
  const RandomSpec spec = RandomSpec::uniform(kFloat32);
  const Shape global = {6, 10};
  const Tensor full = generate_full(spec, global, 4);
  // Output is a transposed view: out[i][j] lives at column-major position.
  Tensor base = zeros({5, 4}, kFloat32);
  Tensor out = base.transpose(0, 1);  // shape [4, 5], strides [1, 4]
  const Shape off = {1, 3};
  fill_random(out, spec, kSeed, 4, global, off);
  CHECK(out.to_vector<double>() == cut(full, off, out.sizes()).to_vector<double>());
  // Output is a narrowed view of a larger buffer: nothing outside it is touched.
  Tensor big = zeros({6, 12}, kFloat32);
  Tensor win = big.narrow(1, 2, 10);
  fill_random(win, spec, kSeed, 4, global, Shape{0, 0});
  CHECK(win.to_vector<double>() == full.to_vector<double>());
  for (int64_t r = 0; r < 6; ++r) {
    CHECK(big.at<float>(Shape{r, 0}) == 0.0f);
    CHECK(big.at<float>(Shape{r, 1}) == 0.0f);
  }
}

TEST_CASE("large blocks are identical for any thread count", "[rng][fill]") {
  const Shape global = {301, 1009};  // > the parallel threshold, uneven rows
  const Shape off = {17, 3}, sz = {250, 1000};
  const int saved = rng_num_threads();
  for (const RandomSpec& spec : {RandomSpec::uniform(kFloat32), RandomSpec::normal(kFloat64),
                                 RandomSpec::randint(kInt64, 0, 1000)}) {
    set_rng_num_threads(1);
    Tensor a = empty(sz, spec.dtype);
    fill_random(a, spec, kSeed, 8, global, off);
    for (int nt : {2, 3, 7}) {
      set_rng_num_threads(nt);
      Tensor b = empty(sz, spec.dtype);
      fill_random(b, spec, kSeed, 8, global, off);
      CHECK(a.to_vector<double>() == b.to_vector<double>());
    }
    // Spot checks against the direct formula.
    const std::vector<double> v = a.to_vector<double>();
    for (int64_t r : {0, 111, 249}) {
      for (int64_t c : {0, 500, 999}) {
        const uint64_t gi = uint64_t((off[0] + r) * global[1] + off[1] + c);
        const double want = reference(spec, 8, gi);
        CHECK(std::abs(v[r * sz[1] + c] - want) <= tolerance(spec, want));
      }
    }
  }
  set_rng_num_threads(0);
  CHECK(rng_num_threads() == saved);
  // Unset, the generator follows the intra-op count (dtensor/ops/threads.h).
  const int intra = get_num_threads();
  set_num_threads(intra + 2);
  CHECK(rng_num_threads() == intra + 2);
  set_num_threads(intra);
}

TEST_CASE("fill_random rejects bad blocks and specs", "[rng][fill]") {
  Tensor t = empty({2, 3}, kFloat32);
  const Shape g = {4, 3}, zero = {0, 0};
  REQUIRE_THROWS_WITH(fill_random(t, RandomSpec::uniform(), 1, 0, Shape{4}, Shape{0}),
                      Catch::Contains("[fill_random]") && Catch::Contains("rank"));
  REQUIRE_THROWS_WITH(fill_random(t, RandomSpec::uniform(), 1, 0, g, Shape{3, 0}),
                      Catch::Contains("[fill_random]") && Catch::Contains("does not fit"));
  REQUIRE_THROWS_WITH(fill_random(t, RandomSpec::uniform(), 1, 0, g, Shape{-1, 0}),
                      Catch::Contains("[fill_random]"));
  REQUIRE_THROWS_WITH(fill_random(t, RandomSpec::uniform(kFloat64), 1, 0, g, zero),
                      Catch::Contains("[fill_random]") && Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(fill_random(t, RandomSpec::uniform(kFloat32, 2.0, 1.0), 1, 0, g, zero),
                      Catch::Contains("[fill_random]") && Catch::Contains("low <= high"));
  REQUIRE_THROWS_WITH(fill_random(t, RandomSpec::normal(kFloat32, 0.0, -1.0), 1, 0, g, zero),
                      Catch::Contains("std"));
  REQUIRE_THROWS_WITH(fill_random(t, RandomSpec::bernoulli(kFloat32, 1.5), 1, 0, g, zero),
                      Catch::Contains("p in [0, 1]"));
  Tensor i = empty({2, 3}, kInt32);
  REQUIRE_THROWS_WITH(fill_random(i, RandomSpec::uniform(kInt32), 1, 0, g, zero),
                      Catch::Contains("floating"));
  REQUIRE_THROWS_WITH(fill_random(i, RandomSpec::randint(kInt32, 5, 5), 1, 0, g, zero),
                      Catch::Contains("low < high"));
  REQUIRE_THROWS_WITH(
      fill_random(i, RandomSpec::randint(kInt32, 0, int64_t{1} << 40), 1, 0, g, zero),
      Catch::Contains("int32"));
  REQUIRE_THROWS_AS(fill_random(Tensor(), RandomSpec::uniform(), 1, 0, g, zero), Error);
  Tensor in = empty({2, 3}, kFloat32);
  Tensor out = empty({3, 2}, kFloat32);
  REQUIRE_THROWS_WITH(dropout_block(in, out, Tensor(), 0.5, 1, 0, Shape{3, 2}, zero),
                      Catch::Contains("[dropout]"));
}

TEST_CASE("the float Box-Muller log and cos are accurate over every input", "[rng][fill]") {
  // Exhaustive over the 2^24 possible inputs of each.
  double worst_log = 0, worst_cos = 0;
  for (uint32_t k = 1; k <= (1u << 24); ++k) {
    const double want = -2.0 * std::log(double(k) * 0x1p-24);
    const double got = detail::neg2_log_unit24(k);
    const double err = want == 0.0 ? std::abs(got) : std::abs(got - want) / want;
    worst_log = std::max(worst_log, err);
  }
  for (uint32_t j = 0; j < (1u << 24); ++j) {
    const double want = std::cos(2.0 * M_PI * double(j) * 0x1p-24);
    worst_cos = std::max(worst_cos, std::abs(double(detail::cos_2pi_unit24(j)) - want));
  }
  INFO("worst relative log error " << worst_log << ", worst absolute cos error " << worst_cos);
  CHECK(worst_log < 3e-7);  // a few float ulp
  CHECK(worst_cos < 3e-7);
}

TEST_CASE("dropout_block on a block equals the block of the full dropout", "[rng][fill]") {
  const Shape global = {7, 10};
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dtype_name(d));
    Tensor x = empty(global, d);
    fill_random(x, RandomSpec::normal(d), 99, 0, global, Shape{0, 0});
    Tensor full_out = empty(global, d);
    Tensor full_mask = empty(global, kBool);
    dropout_block(x, full_out, full_mask, 0.4, kSeed, 16, global, Shape{0, 0});
    // The keep mask is exactly where the dropout_mask spec is non-zero.
    Tensor scaled = generate_full(RandomSpec::dropout_mask(d, 0.4), global, 16);
    const std::vector<double> sv = scaled.to_vector<double>();
    const std::vector<double> mv = full_mask.to_vector<double>();
    for (size_t i = 0; i < sv.size(); ++i) REQUIRE((sv[i] != 0.0) == (mv[i] != 0.0));
    for (const auto& [off, sz] :
         {std::pair<Shape, Shape>{{0, 0}, {3, 10}}, std::pair<Shape, Shape>{{3, 4}, {4, 6}},
          std::pair<Shape, Shape>{{6, 9}, {1, 1}}, std::pair<Shape, Shape>{{7, 0}, {0, 10}}}) {
      INFO("block " << shape_str(sz) << " at " << shape_str(off));
      const Tensor in = cut(x, off, sz);  // a strided view of x
      Tensor out = empty(sz, d);
      Tensor mask = empty(sz, kBool);
      dropout_block(in, out, mask, 0.4, kSeed, 16, global, off);
      CHECK(out.to_vector<double>() == cut(full_out, off, sz).to_vector<double>());
      CHECK(mask.to_vector<double>() == cut(full_mask, off, sz).to_vector<double>());
      // In place (out aliases input) without a mask.
      Tensor copy = in.clone();
      dropout_block(copy, copy, Tensor(), 0.4, kSeed, 16, global, off);
      CHECK(copy.to_vector<double>() == out.to_vector<double>());
    }
  }
}
