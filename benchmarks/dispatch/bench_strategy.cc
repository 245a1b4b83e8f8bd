// The strategy-choice rule (dtensor/core/propagation/sharding_propagation.h) measured: c = a @ a^T
// with a [M, K] laid out [S(0), R] on a 2x2 mesh (4 ranks). The two candidates of equal input
// cost that the rule separates:
//   chosen:  what dispatch picks. When K is small next to M that is: gather a^T on mesh dim 0
//            and compute the [M/2, M] block on both ranks of mesh dim 1 (output [S(0), R],
//            nothing pending); when K is large, the chunked layout below, which then moves
//            fewer bytes (half of a^T is gathered) even with its all-reduce counted;
//   chunked: the rule before: also chunk both replicated operands along K on mesh dim 1 (free)
//            and compute half the flops, leaving [S(0), P(sum)]; the all-reduce that resolves
//            it is timed with it ("chunked+reduce"), and without it ("chunked, pending").
//
//   mpirun -np 4 bench_strategy [--iters 15] [--warmup 2] [--json FILE]
//
// Times: median of the max over ranks, the variants interleaved in a shuffled order. Each
// result is checked against a @ a^T on one device.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

bool close_to(const dt::Tensor& got, const dt::Tensor& want) {
  return dt::allclose(got, want, /*rtol=*/1e-4, /*atol=*/1e-3);
}

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t iters = flags.i64("iters", 15), warmup = flags.i64("warmup", 2);
  DT_CHECK(dt::world_size() == 4, "[bench_strategy] needs 4 ranks (a 2x2 mesh), got %d",
           dt::world_size());
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
  const dt::Placements a_layout = {dt::Shard(0), dt::Replicate()};
  bench::JsonLines json("bench_strategy", flags.str("json", ""));
  bench::print0(
      "# bench_strategy: c = a @ a^T, a [M, K] float32 laid out [S(0), R] on a 2x2 mesh; median "
      "of %lld (max over ranks), ms\n",
      static_cast<long long>(iters));
  bench::print0("%6s %6s %10s %10s %18s %18s %8s\n", "M", "K", "chosen", "chunked+reduce",
                "chunked, pending", "chosen placements", "check");
  bool all_ok = true;
  const std::vector<std::pair<int64_t, int64_t>> sizes = {
      {256, 64}, {256, 1024}, {1024, 64}, {1024, 1024}, {2048, 256}};
  for (const auto& [m, k] : sizes) {
    dt::Generator gen(3);
    const dt::Tensor full = dt::randn({m, k}, {}, &gen);
    const dt::Tensor want = dt::matmul(full, full.transpose(0, 1).contiguous());
    const dt::DTensor a = dt::distribute_tensor(full, mesh, a_layout, std::nullopt);
    const dt::DTensor at = dt::transpose(a, 0, 1);
    const dt::DTensor a_chunked = a.redistribute(dt::Placements{dt::Shard(0), dt::Shard(1)});
    const dt::DTensor at_chunked = at.redistribute(dt::Placements{dt::Replicate(), dt::Shard(0)});

    dt::DTensor chosen, chunked, pending;
    const auto run_chosen = [&] { chosen = dt::matmul(a, at); };
    const auto run_chunked = [&] {
      chunked = dt::matmul(a_chunked, at_chunked).redistribute(a_layout);
    };
    const auto run_pending = [&] { pending = dt::matmul(a_chunked, at_chunked); };
    const auto st = bench::time_interleaved({run_chosen, run_chunked, run_pending}, warmup, iters,
                                            /*comm_world=*/true, /*shuffled=*/true);
    const bool ok = pending.placements() == dt::Placements{dt::Shard(0), dt::Partial()} &&
                    close_to(chosen.full_tensor(), want) && close_to(chunked.full_tensor(), want);
    all_ok = all_ok && ok;
    bench::print0("%6lld %6lld %10.3f %10.3f %18.3f %18s %8s\n", static_cast<long long>(m),
                  static_cast<long long>(k), st[0].median * 1e3, st[1].median * 1e3,
                  st[2].median * 1e3, dt::placements_str(chosen.placements()).c_str(),
                  ok ? "ok" : "FAIL");
    auto rec = json.record("matmul(a, a^T)");
    rec.add("shape", "[" + std::to_string(m) + ", " + std::to_string(k) + "]")
        .add("mesh", "2x2")
        .add_stats("", st[0])
        .add("baseline", "chunked K on mesh dim 1 + the all-reduce of P(sum)")
        .add_stats("baseline", st[1])
        .add_stats("pending", st[2])
        .add("ratio_vs_baseline", st[0].median / st[1].median)
        .add("correct", ok);
    json.write(rec);
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
