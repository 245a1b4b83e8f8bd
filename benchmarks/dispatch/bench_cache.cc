// Propagation-cache hit rate over a training-like loop: every step runs the same sequence of
// DTensor ops (matmul, elementwise, softmax, reductions, views, and a division by a scalar
// that changes every step, like a learning-rate schedule). Step 1 fills the cache; from step
// 2 on every lookup should hit (target 100%): scalars that do not change sharding are not in
// the cache key.
//
//   bench_cache [--steps 100] [--check] [--json FILE]   (any rank count; 1-d mesh of all ranks)
#include <algorithm>
#include <string>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t steps = std::max<int64_t>(2, flags.i64("steps", 100));
  const int world = dt::world_size();
  dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {world}, {"x"});
  dt::Generator gen(5);
  const int64_t rows = 16 * world, cols = 32;
  const dt::DTensor x =
      dt::distribute_tensor(dt::randn({rows, cols}, {}, &gen), mesh, {dt::Shard(0)}, std::nullopt);
  const dt::DTensor w = dt::distribute_tensor(dt::randn({cols, cols}, {}, &gen), mesh,
                                              {dt::Replicate()}, std::nullopt);
  int64_t ops_per_step = 0;
  auto step = [&](int64_t i) {
    int64_t n = 0;
    dt::DTensor h = x;
    h = dt::mm(h, w);
    ++n;
    h = dt::add(h, x);
    ++n;
    dt::DTensor a = dt::softmax(h, -1);
    ++n;
    a = dt::mul(a, dt::Scalar(2.0));
    const double lr = 0.1 / double(i + 1);  // changes every step
    a = dt::div(a, dt::Scalar(lr));
    n += 2;
    const int64_t shape[] = {rows / 2, cols * 2};
    dt::DTensor v = dt::view(a, shape);
    dt::DTensor t = dt::transpose(a, 0, 1);
    n += 2;
    (void)v;
    (void)t;
    const int64_t dim1[] = {1};
    dt::DTensor r = dt::sum(a, dim1);
    dt::DTensor loss = dt::sum(r);
    (void)loss;
    n += 2;
    ops_per_step = n;
  };

  bench::JsonLines json("bench_cache", flags.str("json", ""));
  dt::clear_propagation_cache();
  step(0);
  const dt::PropagationCacheStats s1 = dt::propagation_cache_stats();
  for (int64_t i = 1; i < steps; ++i) step(i);
  const dt::PropagationCacheStats s2 = dt::propagation_cache_stats();
  const int64_t hits = s2.hits - s1.hits, misses = s2.misses - s1.misses;
  const double rate = hits + misses > 0 ? double(hits) / double(hits + misses) : 0.0;
  bench::print0(
      "# bench_cache: %lld steps of a training-like sequence (%lld DTensor ops per step: mm, add,\n"
      "# softmax, mul, div by a changing scalar, view, transpose, sum(dim), sum), %d rank(s)\n",
      static_cast<long long>(steps), static_cast<long long>(ops_per_step), world);
  bench::print0("%-12s %8s %8s %8s\n", "phase", "hits", "misses", "entries");
  bench::print0("%-12s %8lld %8lld %8lld\n", "step 1", static_cast<long long>(s1.hits),
                static_cast<long long>(s1.misses), static_cast<long long>(s1.entries));
  bench::print0("%-12s %8lld %8lld %8lld\n", "steps 2..N", static_cast<long long>(hits),
                static_cast<long long>(misses), static_cast<long long>(s2.entries));
  bench::print0("hit rate after step 1: %.2f%% (target 100%%)\n", rate * 100);
  auto rec = json.record("training_loop");
  rec.add("steps", steps)
      .add("ranks", world)
      .add("ops_per_step", ops_per_step)
      .add("step1_hits", s1.hits)
      .add("step1_misses", s1.misses)
      .add("hits_after_step1", hits)
      .add("misses_after_step1", misses)
      .add("entries", s2.entries)
      .add("hit_rate_after_step1", rate)
      .add("target", 1.0);
  json.write(rec);
  // --check: fail when a lookup missed after step 1 (used by the smoke test).
  return flags.has("check") && misses > 0 ? 1 : 0;
}

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
