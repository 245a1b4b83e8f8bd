// Dispatch overhead: a DTensor op whose sharding is in the propagation cache vs the same op on
// the local tensors, on tiny shapes ([8, 8] float32), single process on a 1-rank mesh; and the
// cost of a cache miss (the cache cleared before every call).
//
//   bench_dispatch [--batch 1000] [--min-seconds 0.2] [--json FILE]
//   bench_dispatch --callgrind OP --calls N [--local] [--record]
//       runs N calls of OP (after warm-up) with callgrind instrumentation switched on only
//       around the loop (valgrind --tool=callgrind --instr-atstart=no); scripts/bench.sh runs
//       N and 2N and divides the difference of the instruction counts by N, glibc's allocator
//       left out (callgrind_count.py: its count varies with the heap's layout). --record: the
//       autograd-recording cases (OP recorded; with --local the same call unrecorded).
//
// Per call: median / p10 / p90 over batches of --batch calls. overhead = DTensor - local;
// ratio = DTensor / local. Targets: <= 5 us per cache-hit op, cache miss <= 100 us. Then the
// cost of autograd recording: the ops on inputs that require grad vs the same inputs without
// (target <= 0.5 us per op).
#include <valgrind/callgrind.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

struct OpCase {
  std::string name;
  std::function<dt::Tensor()> dtensor;  // runs the DTensor op, returns its local result
  std::function<dt::Tensor()> local;    // the same op on the local tensors
};

}  // namespace

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t batch = flags.i64("batch", 1000);
  const double min_seconds = flags.f64("min-seconds", 0.2);

  dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"x"});
  dt::Generator gen(3);
  const dt::Tensor a = dt::randn({8, 8}, {}, &gen), b = dt::randn({8, 8}, {}, &gen);
  const dt::DTensor da = dt::distribute_tensor(a, mesh, {dt::Shard(0)}, std::nullopt);
  const dt::DTensor db = dt::distribute_tensor(b, mesh, {dt::Shard(0)}, std::nullopt);
  const dt::DTensor dr = dt::distribute_tensor(b, mesh, {dt::Replicate()}, std::nullopt);
  const dt::Tensor la = da.to_local(), lb = db.to_local(), lr = dr.to_local();

  std::vector<OpCase> ops;
  ops.push_back({"add(S(0), S(0))", [&] { return dt::add(da, db).to_local(); },
                 [&] { return dt::add(la, lb); }});
  ops.push_back({"mul(S(0), 0.5)", [&] { return dt::mul(da, dt::Scalar(0.5)).to_local(); },
                 [&] { return dt::mul(la, dt::Scalar(0.5)); }});
  ops.push_back(
      {"mm(S(0), R)", [&] { return dt::mm(da, dr).to_local(); }, [&] { return dt::mm(la, lr); }});
  ops.push_back({"einsum(S(0), R) mk,kn",
                 [&] {
                   return dt::einsum("mk,kn->mn", {da, dr}).to_local();
                 },
                 [&] {
                   return dt::einsum("mk,kn->mn", {la, lr});
                 }});
  const int64_t dim1[] = {1};
  ops.push_back({"sum(S(0), dim=1)", [&] { return dt::sum(da, dim1).to_local(); },
                 [&] { return dt::sum(la, dim1); }});
  ops.push_back({"transpose(S(0), 0, 1)", [&] { return dt::transpose(da, 0, 1).to_local(); },
                 [&] { return dt::transpose(la, 0, 1); }});
  const int64_t shape416[] = {4, 16};
  ops.push_back({"view(R, [4, 16])", [&] { return dt::view(dr, shape416).to_local(); },
                 [&] { return lr.view(shape416); }});
  ops.push_back({"softmax(S(0), -1)", [&] { return dt::softmax(da, -1).to_local(); },
                 [&] { return dt::softmax(la, -1); }});

  // Autograd recording: the same ops on inputs that require grad (one node recorded per call,
  // freed with its output) vs the same inputs without. Target: <= 0.5 us per op.
  // A graph kept alive across the calls holds the leaves' gradient accumulators, as any
  // training graph does between its first use of a parameter and backward; without it every
  // call would also create and free the accumulators (a per-leaf, not per-op, cost).
  const dt::DTensor ga = da.detach().requires_grad_(), gb = db.detach().requires_grad_(),
                    gr = dr.detach().requires_grad_();
  const dt::DTensor keep_graph = dt::add(dt::add(ga, gb), dt::sum(dt::mm(ga, gr)));
  struct RecordCase {
    std::string name;
    std::function<void()> recorded, plain;
  };
  const std::vector<RecordCase> recorded = {
      {"add(S(0), S(0))", [&] { (void)dt::add(ga, gb); }, [&] { (void)dt::add(da, db); }},
      {"mul(S(0), 0.5)", [&] { (void)dt::mul(ga, dt::Scalar(0.5)); },
       [&] { (void)dt::mul(da, dt::Scalar(0.5)); }},
      {"mm(S(0), R)", [&] { (void)dt::mm(ga, gr); }, [&] { (void)dt::mm(da, dr); }},
      {"sum(S(0), dim=1)", [&] { (void)dt::sum(ga, dim1); }, [&] { (void)dt::sum(da, dim1); }},
      {"transpose(S(0), 0, 1)", [&] { (void)dt::transpose(ga, 0, 1); },
       [&] { (void)dt::transpose(da, 0, 1); }},
  };
  if (flags.has("callgrind")) {
    const std::string want = flags.str("callgrind", "");
    const int64_t calls = flags.i64("calls", 1000);
    const bool local = flags.has("local");
    if (flags.has("record")) {  // the recorded calls (--local: the same calls unrecorded)
      for (const RecordCase& c : recorded) {
        if (c.name.rfind(want, 0) != 0) continue;
        const auto& fn = local ? c.plain : c.recorded;
        for (int i = 0; i < 50; ++i) fn();
        CALLGRIND_ZERO_STATS;
        CALLGRIND_START_INSTRUMENTATION;
        for (int64_t i = 0; i < calls; ++i) fn();
        CALLGRIND_STOP_INSTRUMENTATION;
        return 0;
      }
      std::fprintf(stderr, "bench_dispatch: no recorded op starts with '%s'\n", want.c_str());
      return 2;
    }
    for (const OpCase& c : ops) {
      if (c.name.rfind(want, 0) != 0) continue;
      const auto& fn = local ? c.local : c.dtensor;
      for (int i = 0; i < 50; ++i) (void)fn();  // fills the caches
      CALLGRIND_ZERO_STATS;
      CALLGRIND_START_INSTRUMENTATION;
      for (int64_t i = 0; i < calls; ++i) (void)fn();
      CALLGRIND_STOP_INSTRUMENTATION;
      std::printf("callgrind: %s %s x %lld\n", c.name.c_str(), local ? "local" : "dtensor",
                  static_cast<long long>(calls));
      return 0;
    }
    std::fprintf(stderr, "bench_dispatch: no op starts with '%s'\n", want.c_str());
    return 2;
  }

  bench::JsonLines json("bench_dispatch", flags.str("json", ""));
  bench::print0(
      "# bench_dispatch: [8, 8] float32 on a %d-rank mesh; per-call median over batches of %lld\n"
      "# hit = sharding in the propagation cache; miss = cache cleared before each call\n"
      "# (miss+plan: the redistribute plan cache cleared too). Targets: hit overhead <= 5 us,\n"
      "# miss <= 100 us. Results: %s\n",
      dt::world_size(), static_cast<long long>(batch), json.path().c_str());
  bench::print0("%-24s %9s %9s %9s %9s %8s %10s %10s %5s\n", "op", "local_us", "hit_us", "hit_p90",
                "overhead", "ratio", "miss_us", "miss+plan", "check");
  bool all_ok = true;
  for (const OpCase& c : ops) {
    const bool ok = bench::same_bits(c.dtensor(), c.local());
    all_ok = all_ok && ok;
    const bench::Stats local = bench::time_batched([&] { (void)c.local(); }, batch, min_seconds);
    const auto before = dt::propagation_cache_stats();
    const bench::Stats hit = bench::time_batched([&] { (void)c.dtensor(); }, batch, min_seconds);
    const auto after = dt::propagation_cache_stats();
    const bool all_hits = after.misses == before.misses;
    const int64_t miss_batch = std::max<int64_t>(1, batch / 10);
    const bench::Stats clear_only =
        bench::time_batched([&] { dt::clear_propagation_cache(); }, miss_batch, min_seconds / 4);
    const bench::Stats miss = bench::time_batched(
        [&] {
          dt::clear_propagation_cache();
          (void)c.dtensor();
        },
        miss_batch, min_seconds / 2);
    const bench::Stats miss_plan = bench::time_batched(
        [&] {
          dt::clear_propagation_cache();
          dt::clear_redistribute_plan_cache();
          (void)c.dtensor();
        },
        miss_batch, min_seconds / 2);
    // Miss cost of the op itself: minus the (tiny) clear.
    const double miss_us = (miss.median - clear_only.median) * 1e6;
    const double miss_plan_us = (miss_plan.median - clear_only.median) * 1e6;
    const double overhead_us = (hit.median - local.median) * 1e6;
    bench::print0("%-24s %9.2f %9.2f %9.2f %9.2f %8.2f %10.2f %10.2f %5s\n", c.name.c_str(),
                  local.median * 1e6, hit.median * 1e6, hit.p90 * 1e6, overhead_us,
                  hit.median / local.median, miss_us, miss_plan_us,
                  ok && all_hits ? "ok" : (ok ? "MISS" : "FAIL"));
    auto rec = json.record(c.name);
    rec.add("shape", "[8, 8]")
        .add("ranks", dt::world_size())
        .add("batch", batch)
        .add_stats("", hit)
        .add("baseline", "local op")
        .add_stats("baseline", local)
        .add("overhead_us", overhead_us)
        .add("ratio_vs_baseline", hit.median / local.median)
        .add_stats("miss_raw", miss)
        .add("miss_us", miss_us)
        .add("miss_with_plan_us", miss_plan_us)
        .add("all_hits", all_hits)
        .add("correct", ok);
    json.write(rec);
  }

  bench::print0("\n# autograd recording: inputs that require grad vs not (target <= 0.5 us)\n");
  bench::print0("%-24s %9s %9s %9s\n", "op", "plain_us", "recorded", "overhead");
  for (const RecordCase& c : recorded) {
    // Three alternating rounds, the fastest of each kept: load that comes and goes on a shared
    // machine then hits both alike.
    bench::Stats plain, rec;
    for (int round = 0; round < 3; ++round) {
      const bench::Stats p = bench::time_batched(c.plain, batch, min_seconds / 3);
      const bench::Stats r = bench::time_batched(c.recorded, batch, min_seconds / 3);
      if (round == 0 || p.median < plain.median) plain = p;
      if (round == 0 || r.median < rec.median) rec = r;
    }
    const double overhead_us = (rec.median - plain.median) * 1e6;
    bench::print0("%-24s %9.2f %9.2f %9.2f\n", c.name.c_str(), plain.median * 1e6, rec.median * 1e6,
                  overhead_us);
    auto r = json.record("record " + c.name);
    r.add("ranks", dt::world_size())
        .add_stats("", rec)
        .add("baseline", "the op without recording")
        .add_stats("baseline", plain)
        .add("overhead_us", overhead_us);
    json.write(r);
  }
  return all_ok ? 0 : 1;
}

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
