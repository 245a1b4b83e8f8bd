// The replay memory plan's interval packing (dtensor/compile/detail/replay_pool.h's
// pack_intervals, what Recording::plan runs) on synthetic allocation lists of a training step:
// long-lived activations kept for backward, short temporaries, a few values carried into the
// next replay. The packing must never overlap two intervals alive at once, never do worse than
// its fixed orders, never go below the live peak, and give the same plan every time (its search
// runs under a budget of work, not of time). No time is asserted.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "dtensor/compile/detail/replay_pool.h"

namespace {

using dtensor::compiler::PackInterval;

// n allocations of a step (one per allocation index), each 64 B to 4 KiB: a third of the first
// half kept until the mirrored point of backward, one in 50 carried over to the next replay,
// the others freed within 1-4 allocations.
std::vector<PackInterval> step_allocations(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<PackInterval> items;
  for (int64_t i = 0; i < n; ++i) {
    const auto size = static_cast<int64_t>(64 * (1 + rng() % 64));
    int64_t end = i + 1 + static_cast<int64_t>(rng() % 4);
    if (i < n / 2 && rng() % 3 == 0) end = n - i;
    if (rng() % 50 == 0) end = i + n;
    items.push_back({size, i, std::min(end, i + n)});
  }
  return items;
}

// The most bytes alive at once on the circle of n allocations.
int64_t live_peak(const std::vector<PackInterval>& items, int64_t n) {
  std::vector<int64_t> delta(static_cast<size_t>(n) + 1, 0);
  for (const PackInterval& it : items) {
    delta[static_cast<size_t>(it.start)] += it.size;
    delta[static_cast<size_t>(std::min(it.end, n))] -= it.size;
    if (it.end > n) {
      delta[0] += it.size;
      delta[static_cast<size_t>(it.end - n)] -= it.size;
    }
  }
  int64_t live = 0, peak = 0;
  for (const int64_t d : delta) peak = std::max(peak, live += d);
  return peak;
}

// Alive at once on the circle (as the plan counts it).
bool alive_together(const PackInterval& a, const PackInterval& b, int64_t n) {
  for (const int64_t shift : {-n, int64_t{0}, n}) {
    if (b.start + shift < a.end && a.start < b.end + shift) return true;
  }
  return false;
}

// Pairs alive at once whose bytes overlap.
int64_t overlaps(const std::vector<PackInterval>& items, const std::vector<int64_t>& offsets,
                 int64_t n) {
  int64_t count = 0;
  for (size_t a = 0; a < items.size(); ++a) {
    for (size_t b = a + 1; b < items.size(); ++b) {
      if (alive_together(items[a], items[b], n) && offsets[a] < offsets[b] + items[b].size &&
          offsets[b] < offsets[a] + items[a].size) {
        ++count;
      }
    }
  }
  return count;
}

}  // namespace

TEST_CASE("memory plan packing: 3,000 step allocations, no overlap, within the fixed orders") {
  const int64_t n = 3000;
  const std::vector<PackInterval> items = step_allocations(n, 3);
  const int64_t peak = live_peak(items, n);
  const dtensor::compiler::PackedIntervals p = dtensor::compiler::pack_intervals(items, n, peak);
  REQUIRE(p.offsets.size() == items.size());
  INFO("live peak " << peak << ", arena " << p.arena << ", fixed orders " << p.fixed_arena
                    << ", work " << p.work);
  CHECK(p.arena >= peak);
  CHECK(p.arena <= p.fixed_arena);
  int64_t top = 0, lowest = 0;
  for (size_t a = 0; a < items.size(); ++a) {
    lowest = std::min(lowest, p.offsets[a]);
    top = std::max(top, p.offsets[a] + items[a].size);
  }
  CHECK(lowest == 0);
  CHECK(top == p.arena);
  CHECK(overlaps(items, p.offsets, n) == 0);
  // Reproducible: the same plan again.
  const dtensor::compiler::PackedIntervals again =
      dtensor::compiler::pack_intervals(items, n, peak);
  CHECK(again.offsets == p.offsets);
  CHECK(again.arena == p.arena);
}

TEST_CASE("memory plan packing: small lists reach the live peak or stay within the fixed orders") {
  for (const uint64_t seed : {1, 2, 5, 8}) {
    const int64_t n = 200;
    const std::vector<PackInterval> items = step_allocations(n, seed);
    const int64_t peak = live_peak(items, n);
    const dtensor::compiler::PackedIntervals p = dtensor::compiler::pack_intervals(items, n, peak);
    INFO("seed " << seed << ": live peak " << peak << ", arena " << p.arena << ", fixed orders "
                 << p.fixed_arena);
    CHECK(p.arena >= peak);
    CHECK(p.arena <= p.fixed_arena);
    CHECK(overlaps(items, p.offsets, n) == 0);
  }
}
