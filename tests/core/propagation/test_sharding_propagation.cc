// Single-process tests of the propagation engine: row completion and expansion (pure), the
// registry, OpSchema, cache keys and counters, and the error paths of dispatch. Cost-based
// choices on real multi-rank meshes are in test_dispatch_mpi.cc.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "test_ops.h"

namespace dt = dtensor;
using dt::Partial;
using dt::Placements;
using dt::Replicate;
using dt::Shard;

namespace {
const dt::Placement R = Replicate();
const dt::Placement S0 = Shard(0);
const dt::Placement S1 = Shard(1);
}  // namespace

TEST_CASE("complete_rows adds linearity rows and the all-Replicate row") {
  const dt::StrategyRows mm = {{S0, S0, R}, {S1, R, S1}, {Partial(), S1, S0}};
  const dt::Placement Ps = Partial(dt::ReduceOp::kSum), Pa = Partial(dt::ReduceOp::kAvg);

  SECTION("none: only the replicate row is appended") {
    auto rows = dt::complete_rows("mm", mm, 1, 2, dt::Linearity::kNone);
    REQUIRE(rows.size() == 4);
    CHECK(rows[3] == Placements{R, R, R});
  }
  SECTION("multilinear: P on one input at a time, for sum and avg") {
    auto rows = dt::complete_rows("mm", mm, 1, 2, dt::Linearity::kMultilinear);
    REQUIRE(rows.size() == 3 + 4 + 1);
    CHECK(rows[3] == Placements{Ps, Ps, R});
    CHECK(rows[4] == Placements{Ps, R, Ps});
    CHECK(rows[5] == Placements{Pa, Pa, R});
    CHECK(rows[6] == Placements{Pa, R, Pa});
    CHECK(rows[7] == Placements{R, R, R});
  }
  SECTION("linear: P on every input; duplicates and an existing R row are not repeated") {
    dt::StrategyRows add = {{S0, S0, S0}, {R, R, R}, {Ps, Ps, Ps}};
    auto rows = dt::complete_rows("add", add, 1, 2, dt::Linearity::kLinear);
    REQUIRE(rows.size() == 4);
    CHECK(rows[3] == Placements{Pa, Pa, Pa});
  }
  SECTION("linear in first") {
    auto rows = dt::complete_rows("div", {}, 1, 2, dt::Linearity::kLinearInFirst);
    REQUIRE(rows.size() == 3);
    CHECK(rows[0] == Placements{Ps, Ps, R});
    CHECK(rows[1] == Placements{Pa, Pa, R});
    CHECK(rows[2] == Placements{R, R, R});
  }
  SECTION("a row of the wrong width is an error naming the op") {
    REQUIRE_THROWS_AS(dt::complete_rows("mm", {{S0, S0}}, 1, 2, dt::Linearity::kNone), dt::Error);
    REQUIRE_THROWS_WITH(dt::complete_rows("mm", {{S0, S0}}, 1, 2, dt::Linearity::kNone),
                        Catch::Contains("[mm] strategy row [S(0), S(0)] has 2 placements, "
                                        "expected 3"));
  }
}

TEST_CASE("expand_rows: cartesian product over mesh dims") {
  const dt::StrategyRows rows = {{S0, S0, R}, {S1, R, S1}, {Partial(), S1, S0}, {R, R, R}};
  const int64_t ndims[] = {2, 2, 2};

  SECTION("1-D mesh: one candidate per row") {
    auto c = dt::expand_rows(rows, 1, ndims);
    REQUIRE(c.size() == 4);
    for (size_t k = 0; k < 4; ++k) {
      for (size_t t = 0; t < 3; ++t) CHECK(c[k].placements[t] == Placements{rows[k][t]});
    }
  }
  SECTION("2-D mesh: rows^2, mesh dim 0 outermost") {
    auto c = dt::expand_rows(rows, 2, ndims);
    REQUIRE(c.size() == 16);
    for (size_t i = 0; i < 4; ++i) {
      for (size_t j = 0; j < 4; ++j) {
        const auto& cand = c[i * 4 + j];
        for (size_t t = 0; t < 3; ++t)
          CHECK(cand.placements[t] == Placements{rows[i][t], rows[j][t]});
      }
    }
  }
  SECTION("3-D mesh: rows^3, contains all-Replicate last") {
    auto c = dt::expand_rows(rows, 3, ndims);
    REQUIRE(c.size() == 64);
    // Index (i, j, k) = i * 16 + j * 4 + k.
    const auto& mixed = c[0 * 16 + 2 * 4 + 1];
    CHECK(mixed.placements[0] == Placements{S0, Partial(), S1});
    CHECK(mixed.placements[1] == Placements{S0, S1, R});
    CHECK(mixed.placements[2] == Placements{R, S0, S1});
    CHECK(c.back().placements[0] == Placements{R, R, R});
  }
  SECTION("rows with a Shard dim out of range for a tensor are dropped") {
    const int64_t small[] = {2, 1, 2};  // input 0 is 1-d: S(1) on it is invalid
    auto c = dt::expand_rows(rows, 2, small);
    REQUIRE(c.size() == 9);  // rows 0, 1, 3 survive
    for (const auto& cand : c) {
      for (const auto& p : cand.placements[1]) CHECK(!p.is_shard(1));
    }
  }
  SECTION("no rows, no candidates") {
    CHECK(dt::expand_rows({}, 2, ndims).empty());
  }
}

TEST_CASE("Registry: ids, lookups and errors") {
  const auto& ops = dt::testing::test_ops();
  dt::Registry& reg = dt::op_registry();
  CHECK(reg.find("t_add") == ops.add);
  CHECK(&reg.get(ops.mm->id) == ops.mm);
  CHECK(ops.add->id != ops.mm->id);
  CHECK(reg.find("t_nope") == nullptr);
  REQUIRE_THROWS_WITH(reg.get("t_nope"), Catch::Contains("[Registry] unknown op 't_nope'"));
  dt::OpInfo dup;
  dup.name = "t_add";
  dup.strategy = [](const dt::OpSchema&) { return dt::StrategyRows{}; };
  dup.meta = [](const dt::OpSchema& s) { return dt::OutputMetas{s.input(0).meta()}; };
  dup.kernel = dt::single_output(
      [](const dt::KernelContext&, absl::Span<const dt::Tensor> l) { return l[0]; });
  REQUIRE_THROWS_AS(reg.add(dup), dt::Error);
  REQUIRE_THROWS_WITH(reg.add(dup), Catch::Contains("[Registry] op 't_add' is already registered"));
  dt::OpInfo bad;
  bad.name = "t_no_strategy";
  REQUIRE_THROWS_WITH(reg.add(bad),
                      Catch::Contains("needs a strategy, a meta function and a kernel"));
  bad.strategy = dup.strategy;
  bad.meta = dup.meta;
  REQUIRE_THROWS_WITH(reg.add(bad),
                      Catch::Contains("needs a strategy, a meta function and a kernel"));

  // A second registry's ids never collide with the global one's (the cache is keyed on ids).
  dt::Registry local;
  dup.name = "t_add";
  const dt::OpInfo& mine = local.add(dup);
  CHECK(mine.id != ops.add->id);
  CHECK(local.size() == 1);
  CHECK(local.names() == std::vector<std::string>{"t_add"});
}

TEST_CASE("OpSchema: args, static args, printing") {
  const auto& ops = dt::testing::test_ops();
  auto mesh = dt::init_device_mesh(dt::kCPU, {1});
  dt::DTensorSpec spec(mesh, {S0}, dt::TensorMeta({4, 3}, dt::kFloat32));
  const dt::DTensorSpec* specs[] = {&spec};
  const dt::ArgValue args[] = {int64_t{1}, true};
  dt::OpSchema schema(*ops.sum, specs, args);
  CHECK(schema.arg<int64_t>(0) == 1);
  CHECK(schema.arg<bool>(1));
  CHECK(schema.static_args().size() == 2);
  CHECK(schema.has_arg(1));
  CHECK_FALSE(schema.has_arg(2));
  REQUIRE_THROWS_WITH(schema.arg<double>(0),
                      Catch::Contains("[t_sum] argument 0 is int 1, expected a float"));
  REQUIRE_THROWS_WITH(schema.arg<bool>(5), Catch::Contains("[t_sum] argument 5 is missing"));
  const std::string s = schema.str();
  CHECK_THAT(s, Catch::StartsWith("t_sum(DTensorSpec("));
  CHECK_THAT(s, Catch::EndsWith(", 1, true)"));

  const dt::ArgValue runtime[] = {0.23};
  const dt::DTensorSpec* two[] = {&spec, &spec};
  dt::OpSchema add(*ops.add, two, runtime);
  CHECK(add.static_args().empty());  // alpha is a runtime value

  CHECK(dt::arg_str(dt::ArgValue()) == "None");
  CHECK(dt::arg_str(dt::Shape{2, 3}) == "[2, 3]");
  CHECK(dt::arg_str(dt::kBFloat16) == "bfloat16");
  CHECK(dt::arg_str(std::string_view("mean")) == "'mean'");
  CHECK(dt::args_hash(args) == dt::args_hash(args));
  const dt::ArgValue other[] = {int64_t{0}, true};
  CHECK(dt::args_hash(args) != dt::args_hash(other));
  const dt::ArgValue as_bool[] = {true, true};  // same "value" 1, other type
  CHECK(dt::args_hash(args) != dt::args_hash(as_bool));
}

TEST_CASE("propagation cache: runtime scalars hit, static args miss, counters") {
  auto mesh = dt::init_device_mesh(dt::kCPU, {1});
  dt::Tensor x = dt::testing::make_input({5, 3});
  dt::DTensor a = dt::distribute_tensor(x, mesh, {S0}, std::nullopt);
  dt::clear_propagation_cache();
  CHECK(dt::propagation_cache_stats().hits == 0);
  CHECK(dt::propagation_cache_stats().misses == 0);

  SECTION("a loop of scale(t, s) with changing scalars is all hits after the first call") {
    for (int i = 0; i < 20; ++i) {
      const double s = 0.23 + i;
      dt::DTensor y = dt::testing::t_scale(a, s);
      REQUIRE(dt::equal(y.full_tensor(), dt::testing::naive_scale(x, s)));
    }
    const auto st = dt::propagation_cache_stats();
    CHECK(st.misses == 1);
    CHECK(st.hits == 19);
    CHECK(st.entries == 1);
  }
  SECTION("a changed reduction dim or keepdim is a miss, a repeated one a hit") {
    dt::testing::t_sum(a, 0);
    dt::testing::t_sum(a, 1);
    dt::testing::t_sum(a, 1, true);
    dt::testing::t_sum(a, 0);
    dt::testing::t_sum(a, 1, true);
    const auto st = dt::propagation_cache_stats();
    CHECK(st.misses == 3);
    CHECK(st.hits == 2);
    CHECK(st.entries == 3);
  }
  SECTION("different input specs are different keys; clear resets everything") {
    dt::DTensor r = dt::distribute_tensor(x, mesh, {R}, std::nullopt);
    dt::testing::t_relu(a);
    dt::testing::t_relu(r);
    dt::testing::t_relu(a);
    auto st = dt::propagation_cache_stats();
    CHECK(st.misses == 2);
    CHECK(st.hits == 1);
    dt::clear_propagation_cache();
    st = dt::propagation_cache_stats();
    CHECK(st.hits == 0);
    CHECK(st.misses == 0);
    CHECK(st.entries == 0);
    dt::testing::t_relu(a);
    CHECK(dt::propagation_cache_stats().misses == 1);
  }
  SECTION("a hit returns the very same output spec object (no spec allocation)") {
    dt::DTensor y1 = dt::testing::t_relu(a);
    dt::DTensor y2 = dt::testing::t_relu(a);
    CHECK(y1.spec_ptr().get() == y2.spec_ptr().get());
  }
}

TEST_CASE("propagation errors name the op and carry the schema") {
  const auto& ops = dt::testing::test_ops();
  auto mesh = dt::init_device_mesh(dt::kCPU, {1});
  dt::DTensor a = dt::distribute_tensor(dt::testing::make_input({4, 3}), mesh, {S0}, std::nullopt);
  dt::DTensor b = dt::distribute_tensor(dt::testing::make_input({3, 4}), mesh, {R}, std::nullopt);

  SECTION("meta failure") {
    REQUIRE_THROWS_AS(dt::testing::t_add(a, b), dt::Error);
    REQUIRE_THROWS_WITH(dt::testing::t_add(a, b),
                        Catch::Contains("[t_add] argument other has shape [3, 4]") &&
                            Catch::Contains("(schema: t_add(DTensorSpec(") &&
                            Catch::Contains(", 1)"));
  }
  SECTION("inputs on different meshes") {
    auto mesh2 = dt::init_device_mesh(dt::kCPU, {1, 1});
    dt::DTensor c =
        dt::distribute_tensor(dt::testing::make_input({4, 3}), mesh2, {R, R}, std::nullopt);
    REQUIRE_THROWS_WITH(
        dt::testing::t_add(a, c),
        Catch::Contains("[t_add] inputs live on different meshes (argument other)"));
  }
  SECTION("undefined input") {
    dt::DTensor undef;
    REQUIRE_THROWS_WITH(dt::testing::t_add(a, undef),
                        Catch::Contains("[t_add] argument other is an undefined DTensor"));
  }
  SECTION("in-place op that would change the placements of self") {
    REQUIRE_THROWS_WITH(dt::testing::t_fill_(a),
                        Catch::Contains("[t_fill_] in-place op would change placements of "
                                        "argument self from [S(0)] to [R]"));
    dt::DTensor r = dt::distribute_tensor(dt::testing::make_input({4, 3}), mesh, {R}, std::nullopt);
    dt::DTensor& same = dt::testing::t_fill_(r);
    CHECK(dt::equal(same.full_tensor(), dt::ones({4, 3})));
  }
  SECTION("a kernel returning the wrong shape is caught") {
    dt::OpInfo bad = *ops.relu;
    bad.name = "t_bad_shape";
    bad.kernel = dt::single_output([](const dt::KernelContext&, absl::Span<const dt::Tensor>) {
      return dt::zeros({2, 2});
    });
    static const dt::OpInfo& info = dt::op_registry().add(bad);
    REQUIRE_THROWS_WITH(
        dt::dispatch_sharded(info, {&a}, {}),
        Catch::Contains("[t_bad_shape] local kernel returned [2, 2] float32 for output 0, "
                        "expected [4, 3] float32"));
  }
  SECTION("a multi-output op") {
    dt::OpInfo two;
    two.name = "t_two_outputs";
    two.meta = [](const dt::OpSchema& s) {
      return dt::OutputMetas{s.input(0).meta(), s.input(0).meta()};
    };
    two.strategy = [](const dt::OpSchema&) { return dt::StrategyRows{}; };
    two.kernel = [](const dt::KernelContext&, absl::Span<const dt::Tensor> l,
                    absl::Span<dt::Tensor> o) {
      o[0] = l[0];
      o[1] = dt::testing::naive_scale(l[0], 2.0);
    };
    static const dt::OpInfo& info = dt::op_registry().add(two);
    auto outs = dt::dispatch_sharded(info, {&a}, {});
    REQUIRE(outs.size() == 2);
    CHECK(outs[0].placements() == Placements{R});
    CHECK(dt::equal(outs[1].full_tensor(), dt::testing::naive_scale(a.full_tensor(), 2.0)));
  }
}

// ---- the hit path allocates nothing ------------------------------------------------------------
// Counting allocations means replacing the global operator new, which AddressSanitizer owns:
// the check runs in the ordinary build only.
#if !defined(__SANITIZE_ADDRESS__)
namespace {
std::atomic<bool> g_count_allocs{false};
std::atomic<int64_t> g_allocs{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_count_allocs.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

TEST_CASE("a propagation cache hit allocates nothing beyond the kernel's outputs") {
  const auto& ops = dt::testing::test_ops();
  auto mesh = dt::init_device_mesh(dt::kCPU, {1, 1});
  dt::DTensor a =
      dt::distribute_tensor(dt::testing::make_input({6, 4}), mesh, {S0, S1}, std::nullopt);
  dt::DTensor b =
      dt::distribute_tensor(dt::testing::make_input({6, 4}), mesh, {S0, S1}, std::nullopt);
  // The kernel returns an input (no output allocation), so every allocation is the engine's.
  dt::OpInfo pass = *ops.add;
  pass.name = "t_passthrough";
  pass.kernel = dt::single_output(
      [](const dt::KernelContext&, absl::Span<const dt::Tensor> l) { return l[0]; });
  static const dt::OpInfo& info = dt::op_registry().add(pass);
  const dt::ArgValue args[] = {0.5};
  dt::DTensor warm = dt::dispatch_sharded(info, {&a, &b}, args)[0];  // miss
  g_allocs = 0;
  g_count_allocs = true;
  for (int i = 0; i < 10; ++i) {
    dt::DTensorList hit = dt::dispatch_sharded(info, {&a, &b}, args);
    (void)hit;
  }
  g_count_allocs = false;
  CHECK(g_allocs.load() == 0);
  CHECK(warm.placements() == Placements{S0, S1});
  // The counter does count: a miss allocates (the cache entry and its specs).
  dt::clear_propagation_cache();
  g_count_allocs = true;
  dt::DTensorList miss = dt::dispatch_sharded(info, {&a, &b}, args);
  g_count_allocs = false;
  CHECK(g_allocs.load() > 0);
}
#endif  // !__SANITIZE_ADDRESS__

namespace {

// scale(s) through the cache (pointwise: the output keeps the input's placements and shape).
std::shared_ptr<const dt::OutputSharding> propagate_scale(const dt::DTensorSpec& s, double f) {
  const dt::DTensorSpec* in[] = {&s};
  const dt::ArgValue args[] = {f};
  return dt::propagate(dt::OpSchema(*dt::testing::test_ops().scale, in, args));
}

bool keeps_spec(const dt::OutputSharding& out, const dt::DTensorSpec& s) {
  return out.outputs[0]->placements() == s.placements() && out.outputs[0]->shape() == s.shape();
}

}  // namespace

TEST_CASE("the propagation cache is safe to use from several threads") {
  auto mesh = dt::init_device_mesh(dt::kCPU, {1});
  std::vector<dt::DTensorSpec> specs;
  for (int64_t n = 1; n <= 8; ++n) {
    specs.emplace_back(mesh, Placements{n % 2 ? S0 : R}, dt::TensorMeta({n, 3}, dt::kFloat32));
  }
  dt::clear_propagation_cache();
  constexpr int kThreads = 4, kIters = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        const dt::DTensorSpec& s = specs[(i + t) % specs.size()];
        if (!keeps_spec(*propagate_scale(s, static_cast<double>(i)), s)) wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto st = dt::propagation_cache_stats();
  CHECK(wrong.load() == 0);
  CHECK(st.entries == static_cast<int64_t>(specs.size()));
  CHECK(st.hits + st.misses == kThreads * kIters);
  CHECK(st.misses >= static_cast<int64_t>(specs.size()));
}

TEST_CASE("the propagation cache is bounded: a full cache is cleared, entries stay correct") {
  auto mesh = dt::init_device_mesh(dt::kCPU, {1});
  const int64_t cap = dt::kPropagationCacheCapacity;
  // 2 * cap + 3 distinct keys (the shape differs), then repeats of the newest three.
  std::vector<dt::DTensorSpec> specs;
  for (int64_t n = 1; n <= 2 * cap + 3; ++n) {
    specs.emplace_back(mesh, Placements{n % 2 ? S0 : R}, dt::TensorMeta({n, 3}, dt::kFloat32));
  }
  auto run = [](const dt::DTensorSpec& s) { return propagate_scale(s, 0.5); };
  auto correct = keeps_spec;
  dt::clear_propagation_cache();
  CHECK(dt::propagation_cache_stats().capacity == cap);
  int64_t wrong = 0;
  for (int64_t i = 0; i < cap; ++i) wrong += !correct(*run(specs[i]), specs[i]);
  auto st = dt::propagation_cache_stats();
  CHECK(st.entries == cap);
  CHECK(st.misses == cap);
  CHECK(st.evictions == 0);
  // One more key: the full cache is dropped, the new entry kept.
  auto held = run(specs[0]);  // a hit; the caller's sharding outlives the eviction below
  wrong += !correct(*run(specs[cap]), specs[cap]);
  st = dt::propagation_cache_stats();
  CHECK(st.hits == 1);
  CHECK(st.misses == cap + 1);
  CHECK(st.entries == 1);
  CHECK(st.evictions == cap);
  CHECK(correct(*held, specs[0]));
  for (size_t i = cap + 1; i < specs.size(); ++i) wrong += !correct(*run(specs[i]), specs[i]);
  for (size_t i = specs.size() - 3; i < specs.size(); ++i) {
    wrong += !correct(*run(specs[i]), specs[i]);
  }
  st = dt::propagation_cache_stats();
  CHECK(wrong == 0);
  CHECK(st.misses == 2 * cap + 3);
  CHECK(st.hits == 1 + 3);
  CHECK(st.evictions == 2 * cap);
  CHECK(st.entries == 3);
  CHECK(st.entries <= st.capacity);
  // An evicted key misses again and gets the same answer.
  CHECK(correct(*run(specs[0]), specs[0]));
  CHECK(dt::propagation_cache_stats().misses == 2 * cap + 4);
  dt::clear_propagation_cache();
  st = dt::propagation_cache_stats();
  CHECK(st.evictions == 0);
  CHECK(st.entries == 0);
}

TEST_CASE("the bounded propagation cache stays consistent when threads overflow it") {
  auto mesh = dt::init_device_mesh(dt::kCPU, {1});
  constexpr int kThreads = 4;
  const int64_t per_thread = dt::kPropagationCacheCapacity / 2 + 7;  // 2 * cap + 28 keys
  std::vector<std::vector<dt::DTensorSpec>> specs(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int64_t i = 0; i < per_thread; ++i) {
      specs[t].emplace_back(mesh, Placements{i % 2 ? S0 : R},
                            dt::TensorMeta({t + 1, i + 1}, dt::kFloat32));
    }
  }
  dt::clear_propagation_cache();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (const dt::DTensorSpec& s : specs[t]) {
        if (!keeps_spec(*propagate_scale(s, 1.0), s)) wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto st = dt::propagation_cache_stats();
  CHECK(wrong.load() == 0);
  // Every key is distinct: each call misses and inserts exactly one entry.
  CHECK(st.misses == kThreads * per_thread);
  CHECK(st.hits == 0);
  CHECK(st.entries <= st.capacity);
  CHECK(st.entries + st.evictions == st.misses);
  CHECK(st.evictions >= st.misses - st.capacity);
}
