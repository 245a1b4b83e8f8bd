// Planning cost against mesh size (issue 46): how long a sharding-propagation cache miss and a
// redistribute plan take on meshes of 8 to 65,536 ranks, 1-D to 4-D. One process runs on the
// fake backend as rank 0 of a world of --max-world ranks (dtensor/collectives/fake_communicator.h),
// so the meshes build without MPI; no tensor is allocated (the specs are built from shapes).
//
//   bench_planning_scale [--max-world 65536] [--min-seconds 0.05] [--json FILE]
//
// Columns (per call, median over batches, microseconds):
//   mesh build  building the DeviceMesh (once, not a median: its communicators come from member
//               lists, O(ranks) per dim under the fake backend)
//   mm miss     propagate_uncached of mm(a, b), a [4 * ranks, 1024] rows sharded on dim 0 and
//               columns on the last dim (R between), b [1024, 1024] rows on the last dim: the
//               strategy search and the redistribute costs of each candidate (a cache miss)
//   add miss    propagate_uncached of add(a, a') with a' in the transposed layout
//   plan        find_redistribute_plan from [S(0), S(1), S(0), ...] (P(sum) last) to
//               [R, S(0), S(1), ...]: the planner's Dijkstra over the mesh dims
// The sizes enter only through the mesh shape: a flat line in N means planning does not grow
// with the number of ranks, only with the number of mesh dims.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/dtensor_spec.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

// log2(n) split over `ndim` dims as evenly as possible, the outer dims the smaller.
dt::Shape mesh_shape(int64_t n, int64_t ndim) {
  const int64_t bits = static_cast<int64_t>(std::log2(static_cast<double>(n)) + 0.5);
  dt::Shape s;
  for (int64_t d = 0; d < ndim; ++d) {
    const int64_t b = bits / ndim + (d >= ndim - bits % ndim ? 1 : 0);
    s.push_back(int64_t{1} << b);
  }
  return s;
}

dt::Placements alternating(int64_t ndim, int64_t first) {
  dt::Placements p;
  for (int64_t d = 0; d < ndim; ++d) p.push_back(dt::Shard((d + first) % 2));
  return p;
}

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t max_world = dt::world_size();
  const double min_seconds = flags.f64("min-seconds", 0.05);
  bench::JsonLines json("bench_planning_scale", flags.str("json", ""));
  bench::print0(
      "# bench_planning_scale: fake backend (rank 0 of %lld); per call, median, microseconds\n",
      static_cast<long long>(max_world));
  bench::print0("%7s %4s %20s %12s %10s %10s %10s\n", "ranks", "dims", "mesh", "mesh build",
                "mm miss", "add miss", "plan");
  const dt::OpInfo& mm = dt::ops_op("mm");
  const dt::OpInfo& add = dt::ops_op("add");
  for (int64_t n : {8, 64, 512, 1024, 4096, 65536}) {
    if (n > max_world) break;
    for (int64_t ndim = 1; ndim <= 4; ++ndim) {
      if ((int64_t{1} << ndim) > n) break;
      const dt::Shape shape = mesh_shape(n, ndim);
      std::vector<int> ranks(static_cast<size_t>(n));
      for (int64_t r = 0; r < n; ++r) ranks[static_cast<size_t>(r)] = static_cast<int>(r);
      const auto t0 = std::chrono::steady_clock::now();
      const dt::DeviceMesh mesh(dt::kCPU, shape, ranks);
      const double build_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

      dt::Placements pa(static_cast<size_t>(ndim), dt::Replicate());
      pa[0] = dt::Shard(0);
      if (ndim > 1) pa[static_cast<size_t>(ndim - 1)] = dt::Shard(1);
      dt::Placements pb(static_cast<size_t>(ndim), dt::Replicate());
      if (ndim > 1) pb[static_cast<size_t>(ndim - 1)] = dt::Shard(0);
      const dt::DTensorSpec a(mesh, pa, dt::TensorMeta({4 * n, 1024}, dt::kFloat32));
      const dt::DTensorSpec b(mesh, pb, dt::TensorMeta({1024, 1024}, dt::kFloat32));
      dt::Placements pt = pa;
      std::swap(pt.front(), pt.back());
      const dt::DTensorSpec at(mesh, pt, dt::TensorMeta({4 * n, 1024}, dt::kFloat32));
      const std::vector<const dt::DTensorSpec*> mm_in = {&a, &b}, add_in = {&a, &at};

      dt::Placements src = alternating(ndim, 0), dst = alternating(ndim, 1);
      if (ndim > 1) src.back() = dt::Partial();
      dst.front() = dt::Replicate();
      const dt::Shape global = {4 * n, 4 * n};
      const dt::CostModel model{};

      const auto s_mm = bench::time_batched(
          [&] { dt::propagate_uncached(dt::OpSchema(mm, mm_in, {})); }, 10, min_seconds, 5);
      const auto s_add = bench::time_batched(
          [&] { dt::propagate_uncached(dt::OpSchema(add, add_in, {})); }, 10, min_seconds, 5);
      const auto s_plan = bench::time_batched(
          [&] {
            const auto p = dt::find_redistribute_plan(global, dt::kFloat32, shape, src, dst, model);
            DT_CHECK(p.has_value() && !p->steps.empty(), "[bench_planning_scale] no plan");
          },
          10, min_seconds, 5);
      bench::print0("%7lld %4lld %20s %12.1f %10.1f %10.1f %10.1f\n", static_cast<long long>(n),
                    static_cast<long long>(ndim), dt::shape_str(shape).c_str(), build_s * 1e6,
                    s_mm.median * 1e6, s_add.median * 1e6, s_plan.median * 1e6);
      json.write(json.record("planning")
                     .add("ranks", n)
                     .add("mesh_dims", ndim)
                     .add("mesh", dt::shape_str(shape))
                     .add("mesh_build_us", build_s * 1e6)
                     .add_stats("mm_miss", s_mm)
                     .add_stats("add_miss", s_add)
                     .add_stats("plan", s_plan));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The fake world comes before the Runtime that run_main starts.
  try {
    const bench::Flags flags(argc, argv);
    dt::init_fake_backend(static_cast<int>(flags.i64("max-world", 65536)), 0);
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  return bench::run_main(argc, argv, run);
}
