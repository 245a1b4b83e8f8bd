// The pure redistribute planner: step order, step kinds and modelled costs, without processes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/error.h"
#include "tests/common/dtensor_test_util.h"

namespace dt = dtensor;
using Catch::Contains;

namespace {

using Ints = std::vector<int64_t>;
using K = dt::StepKind;

struct Expect {
  int64_t mesh_dim;
  K kind;
  Ints flat_dims = {};  // a flattened step's mesh dims
};

void check_steps(const dt::RedistributePlan& plan, const std::vector<Expect>& expect) {
  INFO(plan.str());
  REQUIRE(plan.steps.size() == expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    CHECK(plan.steps[i].mesh_dim == expect[i].mesh_dim);
    CHECK(plan.steps[i].kind == expect[i].kind);
    CHECK(Ints(plan.steps[i].flat_dims.begin(), plan.steps[i].flat_dims.end()) ==
          expect[i].flat_dims);
  }
}

// Planned under the documented default constants (passed explicitly: the planner is pure).
dt::RedistributePlan plan(const Ints& shape, const Ints& mesh, dt::Placements src,
                          dt::Placements dst, dt::DType dtype = dt::kFloat32,
                          const dt::CostModel& model = dt::CostModel{}) {
  return dt::plan_redistribute(shape, dtype, mesh, src, dst, model);
}

// Closed forms of the documented alpha-beta model with the default constants.
constexpr double kCollective = 5.0, kAlpha = 5.0, kBeta = 1.0e-4, kLocal = 1.0e-5;
// The fixed and latency terms of one collective over n ranks.
double lat(int64_t n) {
  return kCollective + kAlpha * std::ceil(std::log2(static_cast<double>(n)));
}

using namespace dt::test::placements;

}  // namespace

TEST_CASE("planner: identical placements give an empty plan", "[planner]") {
  const auto p = plan({8, 4}, {4}, {S0}, {S0});
  CHECK(p.steps.empty());
  CHECK(p.cost == 0);
  CHECK(plan({8, 4}, {2, 2}, {S0, dt::Shard(-1)}, {S0, S1}).steps.empty());
}

TEST_CASE("planner: 1-d transitions and their costs", "[planner]") {
  // [8, 4] float32 on 4 ranks: a shard is [2, 4] = 32 bytes, the whole tensor 128 bytes.
  const auto gather = plan({8, 4}, {4}, {S0}, {R});
  check_steps(gather, {{0, K::kAllGather}});
  CHECK(gather.steps[0].src == S0);
  CHECK(gather.steps[0].dst == R);
  CHECK(gather.cost == Approx(lat(4) + kBeta * 3 * 32));

  const auto chunk = plan({8, 4}, {4}, {R}, {S1});
  check_steps(chunk, {{0, K::kLocalChunk}});
  CHECK(chunk.cost == Approx(kLocal * 32));

  const auto reduce = plan({8, 4}, {4}, {Psum}, {R});
  check_steps(reduce, {{0, K::kAllReduce}});
  CHECK(reduce.cost == Approx(lat(4) + kBeta * 2.0 * 3.0 / 4.0 * 128));

  const auto rs = plan({8, 4}, {4}, {Psum}, {S0});
  check_steps(rs, {{0, K::kReduceScatter}});
  CHECK(rs.cost == Approx(lat(4) + kBeta * 3 * 32));
  CHECK(rs.cost < reduce.cost);

  const auto a2a = plan({8, 4}, {4}, {S0}, {S1});
  check_steps(a2a, {{0, K::kAllToAll}});
  CHECK(a2a.cost == Approx(lat(4) + kBeta * 3.0 / 4.0 * 32));

  check_steps(plan({8, 4}, {4}, {R}, {Psum}), {{0, K::kPartition}});
  check_steps(plan({8, 4}, {4}, {R}, {Pmax}), {{0, K::kPartition}});
  check_steps(plan({8, 4}, {4}, {Psum}, {Pavg}), {{0, K::kRescalePartial}});
  check_steps(plan({8, 4}, {4}, {Pavg}, {Psum}), {{0, K::kRescalePartial}});
  check_steps(plan({8, 4}, {4}, {Pavg}, {R}), {{0, K::kAllReduce}});
  // S -> P(sum|avg) is local: the shard at its place in zeros (no all-gather).
  const auto s2p = plan({8, 4}, {4}, {S1}, {Psum});
  check_steps(s2p, {{0, K::kShardToPartial}});
  CHECK(s2p.cost == Approx(kLocal * 128));
  check_steps(plan({8, 4}, {4}, {S0}, {Pavg}), {{0, K::kShardToPartial}});
  // S -> P(max) goes through R.
  check_steps(plan({8, 4}, {4}, {S1}, {Pmax}), {{0, K::kAllGather}, {0, K::kPartition}});
}

TEST_CASE("planner: uneven and empty shards are costed at the largest shard", "[planner]") {
  // 5 rows over 4 ranks: the largest shard has 2 rows of 3 int64 = 48 bytes.
  const auto p = plan({5, 3}, {4}, {S0}, {R}, dt::kInt64);
  check_steps(p, {{0, K::kAllGather}});
  CHECK(p.cost == Approx(lat(4) + kBeta * 3 * 48));
  // Zero-size tensors still need the collective (every rank must take part).
  const auto z = plan({0, 3}, {4}, {S0}, {R});
  check_steps(z, {{0, K::kAllGather}});
  CHECK(z.cost == Approx(lat(4)));
}

TEST_CASE("planner: a size-1 mesh dim is a free relabel", "[planner]") {
  // Its one rank holds the whole piece whatever the placement: no step at all.
  const auto one = plan({4}, {1}, {S0}, {R});
  CHECK(one.steps.empty());
  CHECK(one.cost == 0);
  CHECK(plan({4}, {1}, {Pmax}, {Psum}).steps.empty());  // exact over one rank
  CHECK(plan({4}, {1}, {Pavg}, {Psum}, dt::kInt64).steps.empty());
  // Only the size-2 dim moves data; the size-1 dim does not block the nested gather.
  check_steps(plan({8, 4}, {2, 1}, {S0, S0}, {R, R}), {{0, K::kAllGather}});
  check_steps(plan({8, 4}, {2, 1}, {S0, S0}, {R, S0}), {{0, K::kAllGather}});
  check_steps(plan({8, 4}, {1, 2}, {Psum, S1}, {R, R}), {{1, K::kAllGather}});
}

TEST_CASE("planner: nested sharding gathers innermost first and splits outermost first",
          "[planner]") {
  // Both mesh dims gathered: one flattened all-gather (blocks in row-major order).
  check_steps(plan({8, 4}, {2, 2}, {S0, S0}, {R, R}), {{0, K::kAllGather, {0, 1}}});
  check_steps(plan({8, 4}, {2, 2}, {R, R}, {S0, S0}), {{0, K::kLocalChunk}, {1, K::kLocalChunk}});
  // Same placement on mesh dim 1 before and after, but its meaning changes.
  check_steps(plan({8, 4}, {2, 2}, {S0, S0}, {R, S0}),
              {{0, K::kAllGather, {0, 1}}, {1, K::kLocalChunk}});
  const auto swap = plan({8, 8}, {2, 2}, {S0, S1}, {S1, S0});
  INFO(swap.str());
  // Each step must be legal: replay the states and check the nesting rule.
  dt::Placements state = {S0, S1};
  for (const auto& s : swap.steps) {
    REQUIRE(state[s.mesh_dim] == s.src);
    if (s.is_flattened()) {
      for (size_t f = 0; f < s.flat_dims.size(); ++f) state[s.flat_dims[f]] = s.flat_dst[f];
    } else {
      state[s.mesh_dim] = s.dst;
    }
  }
  CHECK(state == dt::Placements{S1, S0});
  // (One exchange over both dims: see the flattened all-to-all case.)
  check_steps(swap, {{0, K::kAllToAll, {0, 1}}});
  // [S(0), S(0)] -> [S(0), R] gathers over the inner dim only.
  check_steps(plan({8, 4}, {2, 2}, {S0, S0}, {S0, R}), {{1, K::kAllGather}});
  // 3-d mesh, dim 0 sharded over all three mesh dims: one gather over the whole mesh; keeping
  // the outer shard, only the two inner dims flatten.
  check_steps(plan({16, 2}, {2, 2, 2}, {S0, S0, S0}, {R, R, R}), {{0, K::kAllGather, {0, 1, 2}}});
  check_steps(plan({16, 2}, {2, 2, 2}, {S0, S0, S0}, {S0, R, R}), {{1, K::kAllGather, {1, 2}}});
}

TEST_CASE("planner: flattened steps move several mesh dims with one collective", "[planner]") {
  // [S(0), S(1)] -> [R, R]: the per-dim gathers move the same bytes with the same latency in
  // the model; the one flattened gather wins on step count.
  const auto g = plan({8, 8}, {2, 2}, {S0, S1}, {R, R});
  check_steps(g, {{0, K::kAllGather, {0, 1}}});
  CHECK(g.cost == Approx(lat(4) + kBeta * 3 * (4 * 4 * 4)));
  CHECK(g.steps[0].flat_src == dt::Placements{S0, S1});
  CHECK(g.str() == "[dims 0+1: [S(0), S(1)]->R all_gather (15 us)]");
  // [P, P] -> [R, R]: one all-reduce over 4 ranks moves 2*3/4 of the buffer instead of 2*1/2
  // twice.
  const auto r = plan({8, 8}, {2, 2}, {Psum, Psum}, {R, R});
  check_steps(r, {{0, K::kAllReduce, {0, 1}}});
  CHECK(r.cost == Approx(lat(4) + kBeta * 1.5 * 256));
  check_steps(plan({8, 8}, {2, 2}, {Pmax, Pmax}, {R, R}), {{0, K::kAllReduce, {0, 1}}});
  check_steps(plan({8, 8}, {2, 2}, {Pavg, Pavg}, {R, R}), {{0, K::kAllReduce, {0, 1}}});
  // Not flattened: different Partial ops; integer avg (one truncating division by 4 is not two
  // by 2); a shard and a Partial.
  CHECK(plan({8, 8}, {2, 2}, {Psum, Pmax}, {R, R}).steps.size() == 2);
  CHECK(plan({8, 8}, {2, 2}, {Pavg, Pavg}, {R, R}, dt::kInt64).steps.size() == 2);
  CHECK(plan({8, 8}, {2, 2}, {S0, Psum}, {R, R}).steps.size() == 2);
  // 3-d: the dims that move together flatten, a size-1 dim is relabelled and never part of one.
  check_steps(plan({8, 8, 8}, {2, 2, 2}, {S0, S1, dt::Shard(2)}, {R, R, R}),
              {{0, K::kAllGather, {0, 1, 2}}});
  check_steps(plan({8, 8, 8}, {2, 2, 2}, {S0, R, dt::Shard(2)}, {R, R, R}),
              {{0, K::kAllGather, {0, 2}}});
  check_steps(plan({8, 8, 8}, {2, 1, 2}, {S0, S1, dt::Shard(2)}, {R, R, R}),
              {{0, K::kAllGather, {0, 2}}});
  // Uneven: costed at the largest block, like a one-dim step; the padding moves a few more
  // bytes than the per-dim gathers, but one collective is issued instead of two.
  const auto u = plan({5, 3}, {2, 2}, {S0, S1}, {R, R});
  check_steps(u, {{0, K::kAllGather, {0, 1}}});
  CHECK(u.cost == Approx(lat(4) + kBeta * 3 * (3 * 2 * 4)));
}

TEST_CASE("planner: several mesh dims S -> S move with one all-to-all", "[planner]") {
  // [S(0), S(0)] -> [S(1), S(1)]: one exchange over the 4 ranks instead of a gather, an
  // all-to-all and a re-split.
  const auto a = plan({8, 8}, {2, 2}, {S0, S0}, {S1, S1});
  check_steps(a, {{0, K::kAllToAll, {0, 1}}});
  CHECK(a.cost == Approx(lat(4) + kBeta * 0.75 * (2 * 8 * 4)));
  CHECK(a.steps[0].flat_src == dt::Placements{S0, S0});
  CHECK(a.steps[0].flat_dst == dt::Placements{S1, S1});
  CHECK(a.str() == "[dims 0+1: [S(0), S(0)]->[S(1), S(1)] all_to_all (15 us)]");
  // A dim whose placement stays but whose blocks move (nested in a dim that changes) joins.
  check_steps(plan({8, 8}, {2, 2}, {S0, S0}, {S1, S0}), {{0, K::kAllToAll, {0, 1}}});
  check_steps(plan({8, 8}, {2, 2}, {S0, S1}, {S1, S0}), {{0, K::kAllToAll, {0, 1}}});
  // One dim is enough when the other's blocks stay (nothing nested): no flattening.
  check_steps(plan({8, 8}, {2, 2}, {S0, S1}, {S0, S0}), {{1, K::kAllToAll}});
  // 3-d: an outer dim that shards the same tensor dim stays out of the group (its block is
  // the group's region before and after); one further in cannot (it would cut the group's
  // blocks differently before and after), so the whole mesh exchanges.
  check_steps(plan({8, 8}, {2, 2, 2}, {S1, S0, S0}, {S1, S1, S1}), {{1, K::kAllToAll, {1, 2}}});
  check_steps(plan({8, 8}, {2, 2, 2}, {S0, S0, S1}, {S1, S1, S1}), {{0, K::kAllToAll, {0, 1, 2}}});
  // A size-1 dim is relabelled, never part of a group; Partial and R dims are not either.
  check_steps(plan({8, 8}, {2, 1, 2}, {S0, S1, S0}, {S1, S0, S1}), {{0, K::kAllToAll, {0, 2}}});
  check_steps(plan({8, 8}, {2, 2, 2}, {S0, Psum, S0}, {S1, Psum, S1}), {{0, K::kAllToAll, {0, 2}}});
}

TEST_CASE("planner: 2-d partial and mixed transitions", "[planner]") {
  check_steps(plan({8, 4}, {2, 2}, {Psum, R}, {R, R}), {{0, K::kAllReduce}});
  check_steps(plan({8, 4}, {2, 2}, {S0, Psum}, {S0, R}), {{1, K::kAllReduce}});
  check_steps(plan({1024, 1024}, {2, 2}, {Psum, Psum}, {S0, S1}),
              {{0, K::kReduceScatter}, {1, K::kReduceScatter}});
  // Tiny: one flattened all-reduce and local chunks cost less than two collectives.
  check_steps(plan({8, 4}, {2, 2}, {Psum, Psum}, {S0, S1}),
              {{0, K::kAllReduce, {0, 1}}, {1, K::kLocalChunk}, {0, K::kLocalChunk}});
  // Chunking first makes the all-reduce move half the bytes.
  check_steps(plan({64, 64}, {2, 2}, {R, Psum}, {S0, R}),
              {{0, K::kLocalChunk}, {1, K::kAllReduce}});
}

TEST_CASE("planner: every pair on 2-d and 3-d meshes ends at the target", "[planner]") {
  const std::vector<dt::Placement> choices = {R, S0, S1, Psum};
  for (const Ints& mesh : {Ints{2, 2}, Ints{1, 4}, Ints{2, 2, 2}}) {
    size_t combos = 1;
    for (size_t m = 0; m < mesh.size(); ++m) combos *= choices.size();
    auto make = [&](size_t c) {
      dt::Placements p;
      for (size_t m = 0; m < mesh.size(); ++m, c /= choices.size()) {
        p.push_back(choices[c % choices.size()]);
      }
      return p;
    };
    for (size_t a = 0; a < combos; ++a) {
      for (size_t b = 0; b < combos; ++b) {
        const dt::Placements src = make(a), dst = make(b);
        const auto p = plan({9, 5}, mesh, src, dst);
        dt::Placements state = src;
        for (size_t m = 0; m < mesh.size(); ++m) {
          if (mesh[m] == 1) state[m] = dst[m];  // relabelled, no step
        }
        double cost = 0;
        for (const auto& s : p.steps) {
          REQUIRE(mesh[s.mesh_dim] > 1);
          REQUIRE(state[s.mesh_dim] == s.src);
          if (s.is_flattened() && s.kind == K::kAllToAll) {
            // An exchange: every flattened dim shards before and after; no mesh dim outside
            // the step shards, further in, a tensor dim the step's dims shard.
            REQUIRE(s.flat_dims.size() >= 2);
            REQUIRE(s.flat_src.size() == s.flat_dims.size());
            REQUIRE(s.flat_dst.size() == s.flat_dims.size());
            for (size_t f = 0; f < s.flat_dims.size(); ++f) {
              const int64_t d = s.flat_dims[f];
              REQUIRE(mesh[d] > 1);
              REQUIRE(state[d] == s.flat_src[f]);
              REQUIRE(s.flat_src[f].is_shard());
              REQUIRE(s.flat_dst[f].is_shard());
              for (size_t j = d + 1; j < mesh.size(); ++j) {
                const bool in_step = std::find(s.flat_dims.begin(), s.flat_dims.end(),
                                               static_cast<int64_t>(j)) != s.flat_dims.end();
                if (mesh[j] == 1 || in_step || !state[j].is_shard()) continue;
                REQUIRE_FALSE(s.flat_src[f].is_shard(state[j].dim()));
                REQUIRE_FALSE(s.flat_dst[f].is_shard(state[j].dim()));
              }
            }
            for (size_t f = 0; f < s.flat_dims.size(); ++f) state[s.flat_dims[f]] = s.flat_dst[f];
            cost += s.cost;
            continue;
          }
          if (s.is_flattened()) {
            // Every flattened dim goes to R from a placement of the same kind (all shards, or
            // one Partial op); no mesh dim outside the step still shards a gathered tensor dim
            // further in.
            REQUIRE(s.flat_dims.size() >= 2);
            REQUIRE(s.dst.is_replicate());
            for (const dt::Placement& p : s.flat_dst) REQUIRE(p.is_replicate());
            for (size_t f = 0; f < s.flat_dims.size(); ++f) {
              const int64_t d = s.flat_dims[f];
              REQUIRE(mesh[d] > 1);
              REQUIRE(state[d] == s.flat_src[f]);
              REQUIRE(state[d].is_shard() == s.src.is_shard());
              if (state[d].is_partial()) REQUIRE(state[d] == s.src);
              for (size_t j = d + 1; j < mesh.size(); ++j) {
                const bool in_step = std::find(s.flat_dims.begin(), s.flat_dims.end(),
                                               static_cast<int64_t>(j)) != s.flat_dims.end();
                if (mesh[j] == 1 || in_step || !state[d].is_shard()) continue;
                REQUIRE_FALSE(state[j].is_shard(state[d].dim()));
              }
            }
            for (int64_t d : s.flat_dims) state[d] = s.dst;
            cost += s.cost;
            continue;
          }
          // A later mesh dim (of size > 1) must not shard what this step gathers or splits.
          for (size_t j = s.mesh_dim + 1; j < mesh.size(); ++j) {
            if (mesh[j] == 1) continue;
            if (s.src.is_shard()) REQUIRE_FALSE(state[j].is_shard(s.src.dim()));
            if (s.dst.is_shard()) REQUIRE_FALSE(state[j].is_shard(s.dst.dim()));
          }
          state[s.mesh_dim] = s.dst;
          cost += s.cost;
        }
        REQUIRE(state == dst);
        REQUIRE(cost == Approx(p.cost));
        // Deterministic.
        REQUIRE(plan({9, 5}, mesh, src, dst).steps == p.steps);
      }
    }
  }
}

TEST_CASE("planner: the cost model is an argument, the default one is read by value", "[planner]") {
  dt::CostModel m;
  m.alpha_us = 100;
  m.beta_us_per_byte = 0;
  CHECK(plan({8, 4}, {4}, {S0}, {R}, dt::kFloat32, m).cost == Approx(kCollective + 200));
  CHECK(plan({8, 4}, {4}, {S0}, {R}).cost == Approx(lat(4) + kBeta * 3 * 32));
  // Changing the default clears the plan cache (and the propagation cache).
  const dt::DeviceMesh mesh = dt::DeviceMesh(dt::kCPU, {1}, {dt::world_rank()});
  const dt::TensorMeta meta({8, 4}, dt::kFloat32);
  const dt::DTensorSpec a(mesh, {S0}, meta), b(mesh, {R}, meta);
  CHECK(dt::redistribute_cost(a, b) == 0);  // size-1 mesh: a relabel
  CHECK(dt::redistribute_plan_cache_stats().size > 0);
  const dt::CostModel before = dt::default_cost_model();
  dt::set_default_cost_model(m);
  CHECK(dt::default_cost_model() == m);
  CHECK(dt::redistribute_plan_cache_stats().size == 0);
  CHECK(dt::propagation_cache_stats().entries == 0);
  dt::set_default_cost_model(before);
  CHECK(dt::default_cost_model().alpha_us == 5.0);
}

TEST_CASE("planner errors", "[planner]") {
  REQUIRE_THROWS_WITH(plan({8, 4}, {4}, {Pmax}, {Psum}),
                      Contains("[redistribute]") && Contains("P(max)") && Contains("P(sum)"));
  REQUIRE_THROWS_AS(plan({8, 4}, {4}, {Pavg}, {Pmax}), dt::Error);
  REQUIRE_THROWS_WITH(plan({8, 4}, {4}, {Pavg}, {Psum}, dt::kInt64),
                      Contains("[redistribute]") && Contains("int64") && Contains("truncates"));
  CHECK(plan({8, 4}, {4}, {Psum}, {Pavg}, dt::kInt64).steps.size() == 1);  // multiply: exact
  REQUIRE_THROWS_WITH(plan({8, 4}, {4}, {S0, R}, {R}),
                      Contains("[redistribute]") && Contains("source placements"));
  REQUIRE_THROWS_WITH(plan({8, 4}, {4}, {R}, {R, R}), Contains("target placements"));
  REQUIRE_THROWS_WITH(plan({8, 4}, {4}, {dt::Shard(2)}, {R}),
                      Contains("[redistribute]") && Contains("Shard dim 2"));
  REQUIRE_THROWS_AS(plan({8, 4}, {4}, {R}, {dt::Shard(-3)}), dt::Error);
}

TEST_CASE("step kind names", "[planner]") {
  CHECK(dt::step_kind_name(K::kAllGather) == "all_gather");
  CHECK(dt::step_kind_name(K::kAllReduce) == "all_reduce");
  CHECK(dt::step_kind_name(K::kReduceScatter) == "reduce_scatter");
  CHECK(dt::step_kind_name(K::kAllToAll) == "all_to_all");
  CHECK(dt::step_kind_name(K::kLocalChunk) == "local_chunk");
  CHECK(dt::step_kind_name(K::kPartition) == "partition");
  CHECK(dt::step_kind_name(K::kRescalePartial) == "rescale_partial");
  CHECK(dt::step_kind_name(K::kShardToPartial) == "shard_to_partial");
  const auto p = plan({8, 4}, {4}, {S0}, {R});
  CHECK(p.str().find("dim 0: S(0)->R all_gather") != std::string::npos);
}
