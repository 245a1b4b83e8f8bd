// dtensor::compile's cross-rank agreement under mpirun (2 and 4 ranks; dtensor/compile/agree.cc):
// ranks that captured different op sequences, or return different outputs, are detected on every
// rank of the step's input meshes; a correct step with a DTensor on a sub-mesh (recorded only by
// that mesh's ranks) captures and replays; host scalars that differ between ranks raise on every
// rank before any rank re-captures or replays. None of it may hang: a rank-local difference never
// sends ranks to different communicators.
#include <catch2/catch.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dtensor/dtensor.h"
#include "tests/parallel/parallel_test_util.h"

namespace dt = dtensor;

namespace {

dt::DeviceMesh world_mesh() {
  return dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"tp"});
}

// The first half of the world's ranks (rank 0 alone at 2 ranks): built on every rank, as any mesh.
dt::DeviceMesh first_half() {
  std::vector<int> ranks;
  for (int r = 0; r < dt::world_size() / 2; ++r) ranks.push_back(r);
  return dt::DeviceMesh(dt::kCPU, dt::Shape{static_cast<int64_t>(ranks.size())}, ranks, {"sub"});
}

dt::DTensor arange_on(const dt::DeviceMesh& mesh, int64_t rows, double scale) {
  const dt::Tensor t = dt::mul(dt::arange(0, rows * 4).reshape({rows, 4}).to(dt::kFloat64), scale);
  return dt::distribute_tensor(t, mesh, {dt::Shard(0)});
}

}  // namespace

TEST_CASE("ranks that captured different op sequences are detected on every rank", "[compile]") {
  const dt::DeviceMesh mesh = world_mesh();
  const int64_t last = dt::world_size() - 1;
  const dt::DTensor x = dt::distribute_tensor(dt::ones({4, 4}), mesh, {dt::Shard(0)});
  // The last rank takes another branch on a rank-local condition; the extra op is local (no
  // collective), so no communicator would notice.
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) {
    dt::DTensor y = dt::mul(in[0], in[0]);
    if (mesh.get_local_rank(0) == last) y = dt::exp(y);
    return dt::DTensorList{dt::sum(y)};
  });
  REQUIRE_THROWS_WITH(
      step({x}), Catch::Contains("[compile] the ranks of") &&
                     Catch::Contains("captured different op sequences") &&
                     Catch::Contains("rank " + std::to_string(last) + " of the mesh (world rank " +
                                     std::to_string(last) + ")") &&
                     // the first op that differs, with both ranks' ops, on every rank
                     Catch::Contains("They first differ at node 1 of those they share: rank 0 of "
                                     "the mesh ran op 'sum'") &&
                     Catch::Contains("rank " + std::to_string(last) + " ran op 'exp' (") &&
                     Catch::Contains("(its node 1)"));
  CHECK(step.captures() == 0);
}

TEST_CASE("a step with a DTensor on a sub-mesh captures and replays on every rank", "[compile]") {
  // Ops on the sub-mesh are recorded by its ranks only (the others skip them): the world's ranks
  // compare the nodes they all record, the sub-mesh's ranks theirs.
  const dt::DeviceMesh world = world_mesh(), sub = first_half();
  auto fn = [](const dt::DTensorList& in) {
    const dt::DTensor a = dt::sum(dt::mul(in[0], in[0]));
    const dt::DTensor b = dt::exp(dt::mul(in[1], 0.25));
    return dt::DTensorList{a, dt::sum(b), b};
  };
  dt::CompiledStep step = dt::compile(fn);
  for (int i = 0; i < 3; ++i) {
    INFO("call " << i);
    const dt::DTensorList in = {arange_on(world, 5, i + 1.0), arange_on(sub, 3, i + 0.5)};
    const dt::DTensorList got = step(in), want = fn(in);
    CHECK(got[0].full_tensor().item<double>() == want[0].full_tensor().item<double>());
    if (sub.contains_me()) {
      CHECK(got[1].full_tensor().item<double>() == want[1].full_tensor().item<double>());
      CHECK(dt::test::max_diff(got[2].to_local(), want[2].to_local()) == 0.0);
    }
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 2);
}

TEST_CASE("a training step of a sub-mesh's parameter captures and replays bit for bit",
          "[compile]") {
  // The backward formulas, the gradient's accumulation and the optimizer's update of a parameter
  // on the sub-mesh: recorded by its ranks (the update's ranks follow its gradient's), while the
  // world's ranks all record the step counter and the world mesh's ops.
  const dt::DeviceMesh world = world_mesh(), sub = first_half();
  auto make_w = [&] {
    dt::DTensor w = dt::distribute_tensor(
        dt::mul(dt::arange(0, 8).reshape({2, 4}).to(dt::kFloat64), 0.1), sub, {dt::Replicate()});
    w.requires_grad_(true);
    return w;
  };
  dt::DTensor w_e = make_w(), w_c = make_w();
  dt::optim::SGD opt_e({w_e}, dt::optim::SGDOptions(0.1).momentum(0.9));
  dt::optim::SGD opt_c({w_c}, dt::optim::SGDOptions(0.1).momentum(0.9));
  auto train = [](dt::DTensor& w, dt::optim::Optimizer& opt, const dt::DTensorList& in) {
    opt.zero_grad();
    const dt::DTensor loss = dt::sum(dt::exp(dt::mul(in[1], w)));
    loss.backward();
    opt.step();
    return dt::DTensorList{dt::sum(dt::mul(in[0], in[0])), loss.detach()};
  };
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& in) { return train(w_c, opt_c, in); });
  for (int i = 0; i < 4; ++i) {
    INFO("step " << i);
    const dt::DTensorList in = {
        arange_on(world, 5, i + 1.0),
        dt::distribute_tensor(dt::full({2, 4}, 0.1 * i, dt::TensorOptions(dt::kFloat64)), sub,
                              {dt::Replicate()})};
    const dt::DTensorList got = step(in), want = train(w_e, opt_e, in);
    CHECK(got[0].full_tensor().item<double>() == want[0].full_tensor().item<double>());
    if (sub.contains_me()) {
      CHECK(got[1].to_local().item<double>() == want[1].to_local().item<double>());
    }
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 3);
  if (sub.contains_me()) CHECK(dt::test::max_diff(w_c.to_local(), w_e.to_local()) == 0.0);
}

TEST_CASE("ranks of a sub-mesh that captured different op sequences are detected", "[compile]") {
  if (dt::world_size() < 4) return;  // a sub-mesh of two ranks at least
  const dt::DeviceMesh world = world_mesh(), sub = first_half();
  // Rank 1 (in the sub-mesh) takes another branch on its sub-mesh op: the sub-mesh's ranks see
  // it in their hashes, and the world's other ranks learn it in the world's comparison.
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) {
    dt::DTensor b = dt::mul(in[1], 2.0);
    if (dt::world_rank() == 1) b = dt::exp(b);
    return dt::DTensorList{dt::sum(dt::mul(in[0], in[0])), b};
  });
  const dt::DTensorList in = {arange_on(world, 5, 1.0), arange_on(sub, 3, 1.0)};
  if (sub.contains_me()) {
    REQUIRE_THROWS_WITH(step(in), Catch::Contains("[compile] the ranks of DeviceMesh(") &&
                                      Catch::Contains("captured different op sequences: rank 1 "
                                                      "of the mesh (world rank 1)") &&
                                      Catch::Contains("They first differ at node 1 of those they "
                                                      "share: rank 0 of the mesh ran op 'mul'") &&
                                      Catch::Contains("rank 1 ran op 'exp' ("));
  } else {
    // The world's comparison carries what the sub-mesh's ranks found: the ops are named here too.
    REQUIRE_THROWS_WITH(step(in), Catch::Contains("[compile] the ranks captured different op "
                                                  "sequences") &&
                                      Catch::Contains("a smaller mesh of the step's inputs") &&
                                      Catch::Contains("rank 0 of the mesh ran op 'mul'") &&
                                      Catch::Contains("rank 1 ran op 'exp' ("));
  }
  CHECK(step.captures() == 0);
}

TEST_CASE("ranks diverging on an op of a sub-mesh no input lives on are detected", "[compile]") {
  // Issue 42: the sub-mesh is no input's mesh (a constant of the step, as a parameter is), so only
  // the world's comparison sees its ops: each pair of ranks compares the ops both take part in.
  // Before, the world compared only the ops every rank records, and this capture succeeded.
  if (dt::world_size() < 4) return;
  const dt::DeviceMesh world = world_mesh(), sub = first_half();
  const dt::DTensor c = arange_on(sub, 3, 1.0);
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) {
    dt::DTensor b = dt::mul(c, 2.0);
    if (dt::world_rank() == 1) b = dt::exp(b);
    return dt::DTensorList{dt::sum(dt::mul(in[0], in[0])), b};
  });
  REQUIRE_THROWS_WITH(step({arange_on(world, 5, 1.0)}),
                      Catch::Contains("[compile] the ranks of DeviceMesh(") &&
                          Catch::Contains("captured different op sequences: rank 1 of the mesh "
                                          "(world rank 1)") &&
                          Catch::Contains("shares with rank 0 of the mesh (world rank 0)"));
  CHECK(step.captures() == 0);
}

TEST_CASE("a dp x tp step with a collective over the tp dim captures and replays", "[compile]") {
  if (dt::world_size() != 4) return;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
  const dt::DeviceMesh tp = mesh["tp"];
  const dt::DTensor w = arange_on(tp, 4, 0.5);  // a constant on the tp sub-mesh (no input's)
  auto fn = [&](const dt::DTensorList& in) {
    // Shard -> Replicate all-gathers over tp: a collective on a sub-mesh of the input's mesh.
    const dt::DTensor r = dt::mul(w, 3.0).redistribute({dt::Replicate()});
    return dt::DTensorList{dt::sum(dt::mul(in[0], in[0])), dt::sum(r)};
  };
  dt::CompiledStep step = dt::compile(fn);
  const dt::DTensor x = dt::distribute_tensor(dt::ones({4, 4}), mesh, {dt::Shard(0), dt::Shard(1)});
  for (int i = 0; i < 3; ++i) {
    const dt::DTensorList got = step({x}), want = fn({x});
    CHECK(got[0].full_tensor().item<double>() == want[0].full_tensor().item<double>());
    CHECK(got[1].full_tensor().item<double>() == want[1].full_tensor().item<double>());
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 2);
}

TEST_CASE("a rank returning other outputs is detected on every rank, without a hang", "[compile]") {
  const dt::DeviceMesh world = world_mesh();
  const int last = dt::world_size() - 1;
  // A mesh of the last two ranks, which only the last rank's outputs use: the ranks must not
  // compare on the meshes of their outputs (the last rank would wait there for the other).
  const dt::DeviceMesh pair(dt::kCPU, dt::Shape{2}, {last - 1, last}, {"pair"});
  const dt::DTensor x = arange_on(world, 5, 1.0);
  const dt::DTensor y = arange_on(pair, 2, 1.0);
  SECTION("one more output") {
    dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) {
      dt::DTensorList out = {dt::sum(dt::mul(in[0], in[0]))};
      if (dt::world_rank() == last) out.push_back(out[0]);
      return out;
    });
    REQUIRE_THROWS_WITH(step({x}), Catch::Contains("captured different op sequences: rank " +
                                                   std::to_string(last) + " of the mesh") &&
                                       Catch::Contains("or returns other outputs"));
  }
  SECTION("an output on a mesh the others' outputs do not use") {
    dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) {
      const dt::DTensor a = dt::sum(dt::mul(in[0], in[0]));
      return dt::DTensorList{dt::world_rank() == last ? dt::exp(y) : a};
    });
    REQUIRE_THROWS_WITH(step({x}), Catch::Contains("captured different op sequences: rank " +
                                                   std::to_string(last) + " of the mesh"));
  }
}

// A step compiled from a function without scalars has no call passing them: a rank passing some
// could only raise alone (its peers cannot know what it passed without a comparison on every
// call, which such a step does not pay for) while they replay on, so the kind of step, the same
// on every rank, decides at compile time instead.
static_assert(std::is_invocable_v<dt::CompiledStep&, const dt::DTensorList&>);
static_assert(
    !std::is_invocable_v<dt::CompiledStep&, const dt::DTensorList&, const std::vector<double>&>,
    "a StepFn step must not be callable with host scalars");
static_assert(std::is_invocable_v<dt::CompiledScalarStep&, const dt::DTensorList&,
                                  const std::vector<double>&>);
static_assert(std::is_invocable_v<dt::CompiledScalarStep&, const dt::DTensorList&>);
static_assert(std::is_same_v<decltype(dt::compile(std::declval<dt::CompiledStep::StepFn>())),
                             dt::CompiledStep>);
static_assert(std::is_same_v<decltype(dt::compile(std::declval<dt::CompiledStep::ScalarStepFn>())),
                             dt::CompiledScalarStep>);

TEST_CASE("host scalars that differ between ranks raise on every rank, never a hang", "[compile]") {
  const dt::DeviceMesh world = world_mesh();
  const int last = dt::world_size() - 1;
  const dt::DTensor x = arange_on(world, 5, 1.0);
  auto fn = [](const dt::DTensorList& in, const std::vector<double>& s) {
    return dt::DTensorList{dt::div(dt::mul(in[0], s[0]), s[1])};
  };
  for (const bool recapture : {true, false}) {
    INFO("recapture_on_guard_failure " << recapture);
    dt::CompileOptions options;
    options.recapture_on_guard_failure = recapture;
    dt::CompiledScalarStep step = dt::compile(fn, options);
    step({x}, {2, 3});
    step({x}, {2, 3});
    // The last rank's scalar changes while the others' stay: its guard alone would fail (it
    // would re-capture, or raise alone, while the others replay).
    const double mine = dt::world_rank() == last ? 4.0 : 3.0;
    const std::string who =
        "rank " + std::to_string(last) + " of the mesh (world rank " + std::to_string(last) + ")";
    REQUIRE_THROWS_WITH(
        step({x}, {2, mine}),
        Catch::Contains("[compile] the step's host scalars differ between ranks of DeviceMesh(") &&
            Catch::Contains(who + " passes scalar 1 = 4, rank 0 of the mesh (world rank 0) 3"));
    // Another number of scalars on one rank.
    std::vector<double> more = {2, 3};
    if (dt::world_rank() == last) more.push_back(1);
    REQUIRE_THROWS_WITH(step({x}, more),
                        Catch::Contains("passes 3 scalars, rank 0 of the mesh (world rank 0) 2"));
    // No scalars at all on one rank: it must still join the comparison its peers wait in (it
    // once skipped it, and the others waited until the deadline).
    std::vector<double> none_on_last = {2, 3};
    if (dt::world_rank() == last) none_on_last.clear();
    REQUIRE_THROWS_WITH(step({x}, none_on_last),
                        Catch::Contains("passes 0 scalars, rank 0 of the mesh (world rank 0) 2"));
    CHECK(step.captures() == 1);
    CHECK(step.replays() == 1);
    // The ranks still agree afterwards: the same scalars everywhere replay.
    CHECK(dt::test::max_diff(step({x}, {2, 3})[0].to_local(), fn({x}, {2, 3})[0].to_local()) ==
          0.0);
  }
}
