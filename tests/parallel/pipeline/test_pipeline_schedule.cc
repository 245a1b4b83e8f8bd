// Pipeline schedules and splits without processes (dtensor/parallel/pipeline/schedule.h,
// split.h): the action lists of GPipe, 1F1B and interleaved 1F1B, their replay on the cost
// model (no deadlock, bubble equal to theory, in-flight microbatches), the microbatch counts a
// schedule refuses, cutting a chain of modules by FQN, and the transfers' message tags under a
// small tag bound.
#include <catch2/catch.hpp>
#include <set>

#include "dtensor/nn/layers.h"
#include "dtensor/nn/transformer.h"
#include "dtensor/parallel/pipeline/schedule.h"
#include "dtensor/parallel/pipeline/split.h"
#include "dtensor/parallel/pipeline/transfer.h"

namespace pp = dtensor::pipelining;
namespace nn = dtensor::nn;
using pp::ScheduleKind;

TEST_CASE("schedules by name", "[pipeline]") {
  CHECK(pp::schedule_kind("GPipe") == ScheduleKind::kGPipe);
  CHECK(pp::schedule_kind("Schedule1F1B") == ScheduleKind::kOneFOneB);
  CHECK(pp::schedule_kind("interleaved1f1b") == ScheduleKind::kInterleaved1F1B);
  CHECK_THROWS_WITH(pp::schedule_kind("ZeroBubble"),
                    Catch::Contains("[get_schedule_class] unknown schedule 'ZeroBubble'"));
}

TEST_CASE("GPipe and 1F1B orders at pp 2, 4 microbatches", "[pipeline]") {
  CHECK(pp::order_str(pp::pipeline_order(ScheduleKind::kGPipe, 2, 1, 4)) ==
        "rank 0: F0 F1 F2 F3 B0 B1 B2 B3\nrank 1: F0 F1 F2 F3 B0 B1 B2 B3\n");
  CHECK(pp::order_str(pp::pipeline_order(ScheduleKind::kOneFOneB, 2, 1, 4)) ==
        "rank 0: F0 F1 B0 F2 B1 F3 B2 B3\nrank 1: F0 B0 F1 B1 F2 B2 F3 B3\n");
  // Interleaved, 2 stages per rank: rank 0 holds stages 0 and 2, rank 1 stages 1 and 3.
  CHECK(pp::order_str(pp::pipeline_order(ScheduleKind::kInterleaved1F1B, 2, 2, 2)) ==
        "rank 0: 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1\nrank 1: 1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1\n");
}

TEST_CASE("every order runs each microbatch through each stage once, without deadlock",
          "[pipeline]") {
  for (auto kind :
       {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved1F1B}) {
    for (int64_t p : {1, 2, 3, 4}) {
      for (int64_t v : {1, 2, 3}) {
        if (kind != ScheduleKind::kInterleaved1F1B && v > 1) continue;
        for (int64_t m = 1; m <= 3 * p + 1; ++m) {
          if (kind == ScheduleKind::kInterleaved1F1B && m % pp::interleaved_rounds(p, m) != 0)
            continue;
          INFO(pp::schedule_name(kind) << " p " << p << " v " << v << " m " << m);
          const auto order = pp::pipeline_order(kind, p, v, m);
          REQUIRE(static_cast<int64_t>(order.size()) == p);
          for (int64_t r = 0; r < p; ++r) {
            std::set<std::tuple<int, int64_t, int64_t>> seen;
            for (const pp::Action& a : order[r]) {
              CHECK(a.stage % p == r);
              if (a.kind == pp::ActionKind::kBackward) {
                CHECK(seen.count({0, a.stage, a.microbatch}) == 1);  // its forward came first
              }
              CHECK(seen.insert({static_cast<int>(a.kind), a.stage, a.microbatch}).second);
            }
            CHECK(static_cast<int64_t>(seen.size()) == 2 * v * m);
          }
          const pp::Simulation sim = pp::simulate(order, p * v);
          CHECK_FALSE(sim.deadlock);
          if (kind != ScheduleKind::kInterleaved1F1B) {
            CHECK(sim.bubble == Approx(pp::theoretical_bubble(p, m)).margin(1e-12));
          } else if (m >= p) {
            // Interleaving shortens the ramp: never worse than the one-stage-per-rank bubble.
            CHECK(sim.bubble <= pp::theoretical_bubble(p, m) + 1e-12);
          }
          for (int64_t r = 0; r < p; ++r) {
            if (kind == ScheduleKind::kGPipe) CHECK(sim.peak_in_flight[r] == m);
            if (kind == ScheduleKind::kOneFOneB) CHECK(sim.peak_in_flight[r] == std::min(p - r, m));
          }
        }
      }
    }
  }
}

// PyTorch 2.15's ScheduleInterleaved1F1B tables (_calculate_single_rank_operations, the idle
// slots dropped; tests/parallel/torch_pp_parity, round 7b): microbatch counts that are not a
// multiple of the pp size run max(1, m / p) equal rounds. Before round 7b they were refused.
TEST_CASE("interleaved 1F1B orders equal PyTorch's for any microbatch count it runs",
          "[pipeline]") {
  struct Table {
    int64_t p, v, m;
    const char* order;
  };
  const Table tables[] = {
      {2, 2, 1, "rank 0: 0F0 2F0 2B0 0B0\nrank 1: 1F0 3F0 3B0 1B0\n"},
      {2, 2, 3,
       "rank 0: 0F0 0F1 0F2 2F0 2F1 2F2 2B0 2B1 2B2 0B0 0B1 0B2\nrank 1: 1F0 1F1 "
       "1F2 3F0 3B0 3F1 3B1 3F2 3B2 1B0 1B1 1B2\n"},
      {4, 2, 2,
       "rank 0: 0F0 0F1 4F0 4F1 4B0 4B1 0B0 0B1\nrank 1: 1F0 1F1 5F0 5F1 5B0 5B1 "
       "1B0 1B1\nrank 2: 2F0 2F1 6F0 6F1 6B0 6B1 2B0 2B1\nrank 3: 3F0 3F1 7F0 7B0 "
       "7F1 7B1 3B0 3B1\n"},
      {4, 2, 6,
       "rank 0: 0F0 0F1 0F2 0F3 0F4 0F5 4F0 4F1 4F2 4F3 4F4 4F5 4B0 4B1 4B2 4B3 4B4 "
       "4B5 0B0 0B1 0B2 0B3 0B4 0B5\nrank 1: 1F0 1F1 1F2 1F3 1F4 1F5 5F0 5F1 5F2 "
       "5F3 5F4 5B0 5F5 5B1 5B2 5B3 5B4 5B5 1B0 1B1 1B2 1B3 1B4 1B5\nrank 2: 2F0 "
       "2F1 2F2 2F3 2F4 2F5 6F0 6F1 6F2 6B0 6F3 6B1 6F4 6B2 6F5 6B3 6B4 6B5 2B0 2B1 "
       "2B2 2B3 2B4 2B5\nrank 3: 3F0 3F1 3F2 3F3 3F4 3F5 7F0 7B0 7F1 7B1 7F2 7B2 "
       "7F3 7B3 7F4 7B4 7F5 7B5 3B0 3B1 3B2 3B3 3B4 3B5\n"},
      {4, 3, 5,
       "rank 0: 0F0 0F1 0F2 0F3 0F4 4F0 4F1 4F2 4F3 4F4 8F0 8F1 8F2 8F3 8F4 8B0 8B1 "
       "8B2 8B3 8B4 4B0 4B1 4B2 4B3 4B4 0B0 0B1 0B2 0B3 0B4\nrank 1: 1F0 1F1 1F2 "
       "1F3 1F4 5F0 5F1 5F2 5F3 5F4 9F0 9F1 9F2 9F3 9F4 9B0 9B1 9B2 9B3 9B4 5B0 5B1 "
       "5B2 5B3 5B4 1B0 1B1 1B2 1B3 1B4\nrank 2: 2F0 2F1 2F2 2F3 2F4 6F0 6F1 6F2 "
       "6F3 6F4 10F0 10F1 10F2 10B0 10F3 10B1 10F4 10B2 10B3 10B4 6B0 6B1 6B2 6B3 "
       "6B4 2B0 2B1 2B2 2B3 2B4\nrank 3: 3F0 3F1 3F2 3F3 3F4 7F0 7F1 7F2 7F3 7F4 "
       "11F0 11B0 11F1 11B1 11F2 11B2 11F3 11B3 11F4 11B4 7B0 7B1 7B2 7B3 7B4 3B0 "
       "3B1 3B2 3B3 3B4\n"},
      {4, 2, 10,
       "rank 0: 0F0 0F1 0F2 0F3 0F4 4F0 4F1 4F2 4F3 4F4 0F5 0F6 4B0 0F7 4B1 0F8 4B2 "
       "0F9 4B3 4F5 4B4 4F6 0B0 4F7 0B1 4F8 0B2 4F9 0B3 0B4 4B5 4B6 4B7 4B8 4B9 0B5 "
       "0B6 0B7 0B8 0B9\nrank 1: 1F0 1F1 1F2 1F3 1F4 5F0 5F1 5F2 5F3 5F4 5B0 1F5 "
       "5B1 1F6 5B2 1F7 5B3 1F8 5B4 1F9 1B0 5F5 1B1 5F6 1B2 5F7 1B3 5F8 1B4 5F9 5B5 "
       "5B6 5B7 5B8 5B9 1B5 1B6 1B7 1B8 1B9\nrank 2: 2F0 2F1 2F2 2F3 2F4 6F0 6F1 "
       "6F2 6B0 6F3 6B1 6F4 6B2 2F5 6B3 2F6 6B4 2F7 2B0 2F8 2B1 2F9 2B2 6F5 2B3 6F6 "
       "2B4 6F7 6B5 6F8 6B6 6F9 6B7 6B8 6B9 2B5 2B6 2B7 2B8 2B9\nrank 3: 3F0 3F1 "
       "3F2 3F3 3F4 7F0 7B0 7F1 7B1 7F2 7B2 7F3 7B3 7F4 7B4 3F5 3B0 3F6 3B1 3F7 3B2 "
       "3F8 3B3 3F9 3B4 7F5 7B5 7F6 7B6 7F7 7B7 7F8 7B8 7F9 7B9 3B5 3B6 3B7 3B8 "
       "3B9\n"},
  };
  for (const Table& t : tables) {
    INFO("p " << t.p << " v " << t.v << " m " << t.m);
    const auto order = pp::pipeline_order(ScheduleKind::kInterleaved1F1B, t.p, t.v, t.m);
    CHECK(pp::order_str(order) == t.order);
    CHECK_FALSE(pp::simulate(order, t.p * t.v).deadlock);
  }
  // m = 5 on 2 ranks is 2 rounds, m = 9 on 4 ranks 2 rounds: unequal, refused as by PyTorch.
  CHECK_THROWS_WITH(pp::pipeline_order(ScheduleKind::kInterleaved1F1B, 2, 2, 5),
                    Catch::Contains("[ScheduleInterleaved1F1B] n_microbatches 5 is not a multiple "
                                    "of the 2 rounds"));
  CHECK_THROWS_WITH(pp::pipeline_order(ScheduleKind::kInterleaved1F1B, 4, 2, 9),
                    Catch::Contains("n_microbatches 9 is not a multiple of the 2 rounds"));
  // The message names the accepted counts: any up to 2 p - 1, then the nearest ones.
  CHECK_THROWS_WITH(pp::pipeline_order(ScheduleKind::kInterleaved1F1B, 4, 2, 9),
                    Catch::Contains("accepted: 1 to 7, then the counts m that floor(m / pp "
                                    "size) divides, the nearest 8 and 10"));
  CHECK_THROWS_WITH(pp::pipeline_order(ScheduleKind::kInterleaved1F1B, 4, 2, 13),
                    Catch::Contains("the nearest 12 and 15"));
}

TEST_CASE("a deadlocking order is detected", "[pipeline]") {
  // Rank 0 waits for the gradient of microbatch 1 before sending its activation.
  std::vector<std::vector<pp::Action>> order = {
      {{pp::ActionKind::kForward, 0, 0}, {pp::ActionKind::kBackward, 0, 1}},
      {{pp::ActionKind::kForward, 1, 1}, {pp::ActionKind::kBackward, 1, 1}}};
  CHECK(pp::simulate(order, 2).deadlock);
}

TEST_CASE("microbatch counts a schedule cannot use", "[pipeline]") {
  CHECK_THROWS_WITH(pp::pipeline_order(ScheduleKind::kInterleaved1F1B, 4, 2, 9),
                    Catch::Contains("[ScheduleInterleaved1F1B] n_microbatches 9 is not a multiple "
                                    "of the 2 rounds"));
  CHECK_THROWS_WITH(pp::pipeline_order(ScheduleKind::kGPipe, 2, 1, 0),
                    Catch::Contains("[ScheduleGPipe] n_microbatches is 0 (expected at least 1)"));
  CHECK_THROWS_WITH(pp::pipeline_order(ScheduleKind::kOneFOneB, 2, 2, 4),
                    Catch::Contains("[Schedule1F1B] takes one stage per rank, got 2"));
}

namespace {
// tok (Linear), layers (a ModuleList of 4 Linears), norm, output: 7 units.
nn::ModulePtr chain() {
  auto root = std::make_shared<nn::ModuleList>();
  root->register_module("tok", std::make_shared<nn::Linear>(4, 4));
  auto layers = std::make_shared<nn::ModuleList>();
  for (int i = 0; i < 4; ++i) layers->append(std::make_shared<nn::Linear>(4, 4));
  root->register_module("layers", layers);
  root->register_module("norm", std::make_shared<nn::RMSNorm>(4));
  root->register_module("output", std::make_shared<nn::Linear>(4, 2, false));
  return root;
}

std::vector<std::string> names(const nn::ModulePtr& m) {
  std::vector<std::string> out;
  for (const auto& [fqn, p] : m->named_parameters()) out.push_back(fqn);
  return out;
}
}  // namespace

TEST_CASE("pipeline_split cuts a chain by FQN and keeps the global names", "[pipeline]") {
  const nn::ModulePtr model = chain();
  std::vector<std::string> units;
  for (const auto& [fqn, m] : pp::chain_units(model)) units.push_back(fqn);
  CHECK(units == std::vector<std::string>{"tok", "layers.0", "layers.1", "layers.2", "layers.3",
                                          "norm", "output"});
  const auto stages = pp::pipeline_split(model, {"layers.2", "norm"});
  REQUIRE(stages.size() == 3);
  CHECK(names(stages[0]) == std::vector<std::string>{"tok.weight", "tok.bias", "layers.0.weight",
                                                     "layers.0.bias", "layers.1.weight",
                                                     "layers.1.bias"});
  CHECK(names(stages[2]) == std::vector<std::string>{"norm.weight", "output.weight"});
  // The stages share the model's parameters.
  CHECK(stages[1]->get_parameter("layers.3.weight").to_local().data_ptr() ==
        model->get_parameter("layers.3.weight").to_local().data_ptr());
  // A nested ModuleList's name cuts before its first unit; by count, sizes differ by one.
  CHECK(names(pp::pipeline_split(model, {"layers"})[1]).front() == "layers.0.weight");
  const auto four = pp::pipeline_split(model, 4);
  CHECK(names(four[0]) == std::vector<std::string>{"tok.weight", "tok.bias"});  // 1, 2, 2, 2 units
  CHECK(names(four[3]) == std::vector<std::string>{"norm.weight", "output.weight"});
}

TEST_CASE("pipeline_split errors", "[pipeline]") {
  const nn::ModulePtr model = chain();
  CHECK_THROWS_WITH(pp::pipeline_split(model, {"layers.9"}),
                    Catch::Contains("[pipeline_split] split point 'layers.9' is not a unit of the "
                                    "chain (units: tok, layers.0, layers.1, layers.2, layers.3, "
                                    "norm, output)"));
  CHECK_THROWS_WITH(pp::pipeline_split(model, {"norm", "layers.1"}),
                    Catch::Contains("split point 'layers.1' (unit 2) would leave an empty stage"));
  CHECK_THROWS_WITH(pp::pipeline_split(model, {"tok"}), Catch::Contains("empty stage"));
  CHECK_THROWS_WITH(pp::pipeline_split(model, 8), Catch::Contains("cannot cut a chain of 7 units"));
}

// R2-4: the tags stay within [kTransferTagBase, tag_ub] whatever the step, are distinct within a
// step, and a step that needs more tags than the bound allows is refused by name.
TEST_CASE("transfer tags stay under the communicator's tag bound", "[pipeline]") {
  namespace d = pp::detail;
  using Dir = d::Direction;
  const int base = d::kTransferTagBase;
  // 4 stages x 3 microbatches: 48 tags per step; a bound leaving 50 tags wraps every step.
  const int64_t S = 4, m = 3;
  CHECK(d::tags_per_step(S, m) == 48);
  for (int tag_ub : {base + 47, base + 49, 32767, 2147483647}) {
    INFO("tag_ub " << tag_ub);
    CHECK_NOTHROW(d::check_tag_space(S, m, tag_ub, "ScheduleGPipe"));
    for (int64_t step : {0, 1, 15, 16, 1000003}) {
      std::set<int> seen;
      for (Dir dir : {Dir::kActivation, Dir::kGradient}) {
        for (int64_t to = 0; to < S; ++to) {
          for (int64_t i = 0; i < m; ++i) {
            for (int part : {0, 1}) {
              const int t = d::transfer_tag(step, {dir, to, to, i}, part, S, m, tag_ub);
              CHECK(t >= base);
              CHECK(t <= tag_ub);
              seen.insert(t);
            }
          }
        }
      }
      CHECK(seen.size() == 48);  // distinct within the step
    }
  }
  // The most the old numbering used (kMaxStages stages, kMaxMicrobatches microbatches) fits
  // MPI's guaranteed 32767 only when the step is small enough: refused with the numbers.
  CHECK_THROWS_WITH(
      d::check_tag_space(64, 1024, 32767, "Schedule1F1B"),
      Catch::Contains("[Schedule1F1B] a step of 64 stages and 1024 microbatches "
                      "needs 262144 message tags") &&
          Catch::Contains("tags from 8192 reach only 32767 (MPI_TAG_UB), 24576 tags"));
  CHECK_THROWS_WITH(d::check_tag_space(S, m, base + 46, "ScheduleGPipe"),
                    Catch::Contains("needs 48 message tags"));
  CHECK_THROWS_WITH(d::check_tag_space(S, m, base - 10, "ScheduleGPipe"),
                    Catch::Contains("0 tags"));
}
