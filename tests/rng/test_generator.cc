// Generator state, default generators, manual_seed, RNGStateGuard, fork_rng, and how much each
// op advances the offset.
#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "dtensor/rng/random.h"
#include "dtensor/tensor/compare.h"

using namespace dtensor;

TEST_CASE("reserve returns the old offset and advances in whole Philox blocks", "[rng][gen]") {
  Generator g(7);
  CHECK(g.seed() == 7);
  CHECK(g.offset() == 0);
  CHECK(g.reserve(5) == 0);
  CHECK(g.offset() == 8);
  CHECK(g.reserve(0) == 8);
  CHECK(g.offset() == 8);
  CHECK(g.reserve(4) == 8);
  CHECK(g.offset() == 12);
  g.set_offset(13);  // not a multiple of 4: the next reservation starts at 16
  const GeneratorState s = g.reserve_state(1);
  CHECK(s.seed == 7);
  CHECK(s.offset == 16);
  CHECK(g.offset() == 20);
  g.manual_seed(9);
  CHECK(g.state() == GeneratorState{9, 0});
  Generator copy = g;
  copy.reserve(4);
  CHECK(g.offset() == 0);
  CHECK(copy.offset() == 4);
}

TEST_CASE("reserve is thread-safe: concurrent reservations never overlap", "[rng][gen]") {
  Generator g(1);
  constexpr int kThreads = 4, kPer = 2000;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) got[t].push_back(g.reserve(3));
    });
  }
  for (auto& t : ts) t.join();
  std::vector<uint64_t> all;
  for (auto& v : got) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) REQUIRE(all[i] == 4 * i);
  CHECK(g.offset() == 4u * kThreads * kPer);
}

TEST_CASE("each random op advances the default generator by numel * W rounded to 4", "[rng][gen]") {
  manual_seed(123);
  Generator& g = default_generator();
  CHECK(g.state() == GeneratorState{123, 0});
  rand({5}, kFloat32);
  CHECK(g.offset() == 8);
  rand({3}, kFloat64);  // 6 words -> 8
  CHECK(g.offset() == 16);
  randn({3}, kFloat32);  // 6 -> 8
  CHECK(g.offset() == 24);
  randn({3}, kFloat64);  // 12
  CHECK(g.offset() == 36);
  randn({2, 3}, kBFloat16);  // 12
  CHECK(g.offset() == 48);
  randint(0, 10, {7});  // 14 -> 16
  CHECK(g.offset() == 64);
  bernoulli({0}, 0.5);
  CHECK(g.offset() == 64);
  dropout(ones({9}), 0.5);  // 9 -> 12
  CHECK(g.offset() == 76);
  dropout(ones({9}), 0.5, /*train=*/false);
  dropout(ones({9}), 0.0);
  CHECK(g.offset() == 76);
  Tensor t = empty({4, 4}, kFloat16);
  uniform_(t, -1, 1);
  normal_(t);
  CHECK(g.offset() == 76 + 16 + 32);
  // An explicit generator leaves the default one alone.
  Generator mine(5);
  rand({10}, {}, &mine);
  CHECK(mine.offset() == 12);
  CHECK(g.offset() == 124);
}

TEST_CASE("manual_seed makes runs reproducible and different seeds differ", "[rng][gen]") {
  manual_seed(2024);
  const Tensor a = rand({100});
  const Tensor b = randn({10, 10});
  manual_seed(2024);
  CHECK(equal(rand({100}), a));
  CHECK(equal(randn({10, 10}), b));
  CHECK_FALSE(equal(rand({100}), a));  // the stream moved on
  manual_seed(2025);
  CHECK_FALSE(equal(rand({100}), a));
  CHECK(initial_seed() == 2025);
  // rand with an explicit generator seeded the same way gives the same values.
  Generator g(2024);
  CHECK(equal(rand({100}, {}, &g), a));
}

TEST_CASE("RNGStateGuard and fork_rng restore the generator state", "[rng][gen]") {
  manual_seed(77);
  rand({3});
  const GeneratorState before = default_generator().state();
  Tensor inside;
  {
    RNGStateGuard guard;
    inside = rand({16});
    manual_seed(1);
    rand({16});
  }
  CHECK(default_generator().state() == before);
  CHECK(equal(rand({16}), inside));  // the guarded draw is replayed

  const GeneratorState s2 = default_generator().state();
  const Tensor forked = fork_rng([] { return randn({8}); });
  CHECK(default_generator().state() == s2);
  CHECK(equal(randn({8}), forked));

  try {
    RNGStateGuard guard({Device()});
    rand({100});
    throw Error("boom");
  } catch (const Error&) {
  }
  CHECK(default_generator().state().offset == s2.offset + 16);  // only the randn({8}) above

  Generator g(3);
  {
    RNGStateGuard guard(g);
    g.reserve(100);
  }
  CHECK(g.offset() == 0);
}

TEST_CASE("CUDA default generators are unavailable without a device", "[rng][gen]") {
  if (cuda_device_count() > 0) {
    Generator& g = default_generator(Device(kCUDA, 0));
    CHECK(g.device() == Device(kCUDA, 0));
    manual_seed(11);
    CHECK(g.state() == GeneratorState{11, 0});
  } else {
    REQUIRE_THROWS_WITH(default_generator(Device(kCUDA, 0)),
                        Catch::Contains("[default_generator]"));
  }
}
