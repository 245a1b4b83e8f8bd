// CompileOptions::cuda_graph where no CUDA graph can be made (one rank, CPU tensors): the option
// is accepted and ignored with a clear status, and the step's replays run plainly, equal to the
// eager step bit for bit. The capture itself is tested on a GPU (tests/gpu/
// test_compile_cuda_graph.cc).
#include <catch2/catch.hpp>
#include <string>

#include "dtensor/compile/detail/cuda_graph.h"
#include "dtensor/tensor/detail/storage_pool.h"
#include "tests/compile/cuda_graph_step.h"

namespace dt = dtensor;
namespace cg = dtensor::cuda_graph_test;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Counts the allocations it is asked for and serves none (the allocator's then).
class CountingPool final : public dt::detail::StoragePool {
 public:
  dt::Storage take(size_t, dt::Device) override {
    ++takes;
    return dt::Storage();
  }
  int takes = 0;

 protected:
  void release_all() override {}
};

}  // namespace

TEST_CASE("cuda_graph on CPU tensors: plain replays, equal to eager, the reason reported",
          "[compile][cuda_graph]") {
  const bool adamw = GENERATE(true, false);
  const bool profile = GENERATE(false, true);
  const bool onehot = GENERATE(false, true);  // the GPU test's loss (cuda_graph_step.h)
  INFO((adamw ? "AdamW" : "SGD") << (profile ? ", profiled" : "") << (onehot ? ", one-hot" : ""));
  const dt::Device cpu(dt::kCPU);
  cg::Trainer eager(cpu, adamw, true, onehot), compiled(cpu, adamw, true, onehot);
  dt::CompileOptions options;
  options.cuda_graph = true;
  options.profile = profile;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& batch) { return compiled.step(batch); }, options);
  CHECK_THROWS_WITH(step.cuda_graph_status(), Catch::Contains("has not been called yet"));
  for (int i = 0; i < 6; ++i) {
    INFO("step " << i);
    const dt::DTensorList batch = cg::make_batch(cpu, i);
    const dt::DTensor want = eager.step(batch)[0];
    const dt::DTensor got = step(batch)[0];
    eager.schedule->step();
    compiled.schedule->step();
    REQUIRE(dt::equal(got.to_local(), want.to_local()));
    std::string diff;
    REQUIRE(cg::same_parameters(compiled.net, eager.net, &diff));
    const std::string status = step.cuda_graph_status();
    INFO(status);
    if (i == 0) {
      CHECK(status == "pending");  // captured eagerly, not replayed yet
    } else if (profile) {
      CHECK(starts_with(status, "fallback: CompileOptions::profile times each node"));
    } else {
      CHECK(starts_with(status, "fallback: input 0 is on cpu: a CUDA graph captures CUDA work"));
    }
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 5);
}

TEST_CASE("cuda_graph off: the status says so", "[compile][cuda_graph]") {
  const dt::Device cpu(dt::kCPU);
  cg::Trainer t(cpu, true, false);
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& batch) { return t.step(batch); });
  for (int i = 0; i < 2; ++i) step(cg::make_batch(cpu, i));
  CHECK(step.cuda_graph_status() == "off");
}

TEST_CASE(
    "Graph::run's hooks, which the CUDA-graph capture uses: each node observed, the "
    "allocations asked of the given pool, the step as a plain replay's",
    "[compile][cuda_graph]") {
  const dt::Device cpu(dt::kCPU);
  cg::Trainer eager(cpu, true, true), compiled(cpu, true, true);
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& batch) { return compiled.step(batch); });
  for (int i = 0; i < 2; ++i) {  // the capture and a plain replay
    const dt::DTensorList batch = cg::make_batch(cpu, i);
    REQUIRE(dt::equal(step(batch)[0].to_local(), eager.step(batch)[0].to_local()));
  }
  const dt::compiler::Graph& g = step.graph();
  CountingPool pool;
  size_t before = 0, after = 0;
  bool in_order = true;
  dt::compiler::RunHooks hooks;
  hooks.pool = &pool;
  hooks.observe = [&](size_t k, absl::Span<const dt::Tensor> in, bool done) {
    in_order = in_order && k == (done ? after : before) &&
               in.size() == g.nodes()[k].inputs.size() && (done ? after < before : after == before);
    ++(done ? after : before);
  };
  const dt::DTensorList batch = cg::make_batch(cpu, 2);
  const dt::DTensor got = g.run(batch, nullptr, &hooks)[0];
  const dt::DTensor want = eager.step(batch)[0];
  CHECK(before == g.nodes().size());
  CHECK(after == g.nodes().size());
  CHECK(in_order);
  CHECK(pool.takes > 0);
  REQUIRE(dt::equal(got.to_local(), want.to_local()));
  std::string diff;
  CHECK(cg::same_parameters(compiled.net, eager.net, &diff));
  // A plain replay after it: the memory plan's pool is unaffected.
  const dt::DTensorList next = cg::make_batch(cpu, 3);
  REQUIRE(dt::equal(step(next)[0].to_local(), eager.step(next)[0].to_local()));
  CHECK(cg::same_parameters(compiled.net, eager.net, &diff));
}

TEST_CASE(
    "a capture that fails after a node binding a gradient raises instead of falling back: every "
    "node that binds a .grad a rerun would not undo is irreversible (cuda_graph_irreversible)",
    "[compile][cuda_graph]") {
  // Graph::run's hooks drive the step as the capture does; each node's effect on the
  // parameters' .grad bindings is watched. A failed capture's fallback replays the whole step:
  // a node that bound a gradient (to memory a failed capture never wrote) before the failure must
  // make the capture raise, not fall back; forward nodes must not (a host read in the loss, as
  // cross_entropy's, falls back).
  const dt::Device cpu(dt::kCPU);
  const bool adamw = GENERATE(true, false);
  cg::Trainer compiled(cpu, adamw, false, true);
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& batch) { return compiled.step(batch); });
  for (int i = 0; i < 2; ++i) step(cg::make_batch(cpu, i));
  const dt::compiler::Graph& g = step.graph();
  const std::vector<dt::DTensor> params = compiled.net.parameters();
  auto bindings = [&] {
    std::vector<const void*> b;
    for (const dt::DTensor& p : params) {
      b.push_back(p.grad().defined() ? p.grad().to_local().storage().data() : nullptr);
    }
    return b;
  };
  std::vector<const void*> before;
  int binding_nodes = 0, first_binding = -1, first_irreversible = -1;
  bool all_marked = true;
  dt::compiler::RunHooks hooks;
  hooks.observe = [&](size_t k, absl::Span<const dt::Tensor>, bool done) {
    const dt::compiler::Node& n = g.nodes()[k];
    if (!done) {
      before = bindings();
      if (first_irreversible < 0 && dt::compiler::cuda_graph_irreversible(n)) {
        first_irreversible = static_cast<int>(k);
      }
      return;
    }
    const std::vector<const void*> after = bindings();
    bool bound = false;
    for (size_t i = 0; i < after.size(); ++i) bound = bound || (after[i] != before[i] && after[i]);
    if (!bound) return;
    INFO("node " << k << " (" << n.kind << " " << n.name << ") binds a gradient");
    ++binding_nodes;
    if (first_binding < 0) first_binding = static_cast<int>(k);
    all_marked = all_marked && dt::compiler::cuda_graph_irreversible(n);
  };
  g.run(cg::make_batch(cpu, 2), nullptr, &hooks);
  CHECK(binding_nodes == static_cast<int>(params.size()));
  CHECK(all_marked);
  // Nothing before the first binding is irreversible but the step's own host nodes: the
  // forward and the loss can still fall back.
  CHECK(first_irreversible == first_binding);
  for (const dt::compiler::Node& n : g.nodes()) {
    INFO(n.kind << " " << n.name);
    if (n.kind == "optim") CHECK(dt::compiler::cuda_graph_irreversible(n));
    if (n.kind == "op" || n.kind == "redistribute") {
      CHECK_FALSE(dt::compiler::cuda_graph_irreversible(n));
    }
    if (n.name == "zero_grad" || n.name == "ones") {
      CHECK_FALSE(dt::compiler::cuda_graph_irreversible(n));
    }
  }
}

TEST_CASE(
    "the ranks agree on the first CUDA-graph replay's outcome (agree_cuda_graph_outcome): the "
    "worst, from its first rank, on every rank",
    "[compile][cuda_graph]") {
  using Outcome = dt::compiler::CudaGraphOutcome;
  const int W = dt::world_size(), me = dt::world_rank();
  const dt::DeviceMesh world = dt::init_device_mesh(dt::kCPU, {W}, {"dp"});
  const int64_t rows[] = {2 * W};
  const dt::DTensorList inputs = {dt::distribute_tensor(dt::zeros(rows), world, {dt::Shard(0)}),
                                  dt::distribute_tensor(dt::zeros(rows), world, {dt::Replicate()})};
  const Outcome all_captured =
      dt::compiler::agree_cuda_graph_outcome(inputs, {Outcome::kCaptured, me});
  CHECK(all_captured.state == Outcome::kCaptured);
  // The last rank fell back; with more ranks, rank 1 failed after host state changed too.
  Outcome mine{me == W - 1 ? Outcome::kFellBack : Outcome::kCaptured, me};
  Outcome got = dt::compiler::agree_cuda_graph_outcome(inputs, mine);
  CHECK(got.state == Outcome::kFellBack);
  CHECK(got.rank == W - 1);
  if (W > 2 && me == 1) mine.state = Outcome::kFailedAfterHostState;
  got = dt::compiler::agree_cuda_graph_outcome(inputs, mine);
  CHECK(got.state == (W > 2 ? Outcome::kFailedAfterHostState : Outcome::kFellBack));
  CHECK(got.rank == (W > 2 ? 1 : W - 1));
}
