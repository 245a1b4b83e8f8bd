// Placement values: construction, equality, hashing, printing, errors.
#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>

#include <catch2/catch.hpp>

#include "dtensor/core/placement.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
using Catch::Contains;

TEST_CASE("placement kinds and accessors", "[placement]") {
  const dt::Placement r = dt::Replicate();
  const dt::Placement s = dt::Shard(1);
  const dt::Placement p = dt::Partial(dt::ReduceOp::kMax);
  CHECK(r.is_replicate());
  CHECK(dt::Placement().is_replicate());
  CHECK(s.is_shard());
  CHECK(s.is_shard(1));
  CHECK_FALSE(s.is_shard(0));
  CHECK(s.dim() == 1);
  CHECK(p.is_partial());
  CHECK(p.reduce_op() == dt::ReduceOp::kMax);
  CHECK(dt::Partial().reduce_op() == dt::ReduceOp::kSum);
  CHECK(r.kind() == dt::PlacementKind::kReplicate);
  CHECK(s.kind() == dt::PlacementKind::kShard);
  CHECK(p.kind() == dt::PlacementKind::kPartial);
}

TEST_CASE("placement equality and hashing", "[placement]") {
  CHECK(dt::Shard(0) == dt::Shard(0));
  CHECK_FALSE(dt::Shard(0) == dt::Shard(1));
  CHECK_FALSE(dt::Shard(0) == dt::Replicate());
  CHECK(dt::Partial() == dt::Partial(dt::ReduceOp::kSum));
  CHECK_FALSE(dt::Partial(dt::ReduceOp::kSum) == dt::Partial(dt::ReduceOp::kAvg));
  CHECK_FALSE(dt::Partial() == dt::Replicate());
  CHECK(absl::HashOf(dt::Shard(2)) == absl::HashOf(dt::Shard(2)));
  absl::flat_hash_set<dt::Placement> set = {dt::Shard(0),
                                            dt::Shard(0),
                                            dt::Shard(1),
                                            dt::Replicate(),
                                            dt::Replicate(),
                                            dt::Partial(),
                                            dt::Partial(dt::ReduceOp::kMin),
                                            dt::Partial(dt::ReduceOp::kMin)};
  CHECK(set.size() == 5);
  // Lists hash by content.
  dt::Placements a = {dt::Shard(0), dt::Replicate()};
  dt::Placements b = {dt::Shard(0), dt::Replicate()};
  dt::Placements c = {dt::Replicate(), dt::Shard(0)};
  CHECK(absl::HashOf(a) == absl::HashOf(b));
  CHECK(a == b);
  CHECK_FALSE(a == c);
}

TEST_CASE("placement printing", "[placement]") {
  CHECK(dt::Shard(0).str() == "S(0)");
  CHECK(dt::Shard(-1).str() == "S(-1)");
  CHECK(dt::Replicate().str() == "R");
  CHECK(dt::Partial().str() == "P(sum)");
  CHECK(dt::Partial(dt::ReduceOp::kAvg).str() == "P(avg)");
  CHECK(dt::Partial(dt::ReduceOp::kMax).str() == "P(max)");
  CHECK(dt::Partial(dt::ReduceOp::kMin).str() == "P(min)");
  CHECK(dt::placements_str({dt::Shard(0), dt::Replicate(), dt::Partial()}) == "[S(0), R, P(sum)]");
  CHECK(dt::placements_str({}) == "[]");
}

TEST_CASE("partial rejects product", "[placement]") {
  REQUIRE_THROWS_AS(dt::Partial(dt::ReduceOp::kProduct), dt::Error);
  REQUIRE_THROWS_WITH(dt::Partial(dt::ReduceOp::kProduct),
                      Contains("[Partial]") && Contains("product"));
}
