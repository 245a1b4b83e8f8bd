// Compiled step vs eager step (issue 42): the main example's tensor-parallel transformer
// (RMSNorm, SwiGLU, AdamW, loss parallel) trained with the eager step and with dtensor::compile's
// replay of the same step, interleaved, at each rank count:
//
//   mpirun -np N bench_compile [--dim 64] [--layers 2] [--heads 4] [--vocab 16] [--batch 32]
//                              [--seq 15] [--iters 30] [--warmup 3] [--json FILE]
//
// Prints the median step times (max over ranks) and where replay's time goes, each part
// measured on the replays themselves: kernel time (inside the nodes' computations alone —
// kernels, collectives, allocating their outputs: what any implementation must spend; the eager
// step runs the same kernels on the same shards), free time (giving up values at their last
// reader — the memory plan keeps their storages for the next allocations — and releasing
// argument handles), and the framework's own time = step - kernel time, eager vs
// replay (frees count as framework time on both sides: the eager step frees the same values).
// Beside the "removed" fraction it prints eager - replay per step, which depends on no
// accounting. Then the collectives per step with and without the dedup pass, and what agreeing
// on host scalars across ranks costs per call (a one-op step replayed with a scalar vs without).
// Both models start from the same weights and take the same steps; the run fails unless their
// parameters are bit-identical at the end.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "benchmarks/compile/compile_bench_model.h"
#include "dtensor/dtensor.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace bench = dtensor::bench;

namespace {

using Model = bench::CompileBenchModel;

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const nn::TransformerConfig cfg = bench::compile_bench_config(flags);
  const int64_t batch = flags.i64("batch", 32), seq = cfg.max_seq_len - 1;
  const int64_t iters = flags.i64("iters", 30), warmup = flags.i64("warmup", 3);
  const int world = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {world}, {"tp"});

  Model eager(cfg, mesh), compiled(cfg, mesh), undeduped(cfg, mesh), scheduled(cfg, mesh);
  dt::CompileOptions options;
  options.profile = true;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& in) { return compiled.step(in); }, options);
  dt::CompileOptions with_schedule;
  with_schedule.schedule_collectives = true;
  dt::CompiledStep step_scheduled =
      dt::compile([&](const dt::DTensorList& in) { return scheduled.step(in); }, with_schedule);
  dt::CompileOptions no_dedup;
  no_dedup.dedup_collectives = false;
  dt::CompiledStep step_no_dedup =
      dt::compile([&](const dt::DTensorList& in) { return undeduped.step(in); }, no_dedup);

  const dt::DTensorList in = bench::compile_bench_batch(cfg, batch, mesh);
  step_no_dedup(in);  // captured once, for its collective count

  // Per replay on this rank: its kernel time, free time and whole call time, from the same call
  // (so load noise does not enter twice).
  std::vector<double> kernel_seconds, free_seconds, replay_overhead;
  const std::vector<std::function<void()>> variants = {
      [&] { eager.step(in); },
      [&] {
        const auto t0 = std::chrono::steady_clock::now();
        step(in);
        const double total =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const dt::compiler::ReplayProfile& p = step.last_profile();
        if (step.replays() > 0 && p.kernel_seconds > 0) {
          kernel_seconds.push_back(p.kernel_seconds);
          free_seconds.push_back(p.free_seconds);
          replay_overhead.push_back(total - p.kernel_seconds);
        }
      },
      [&] { step_scheduled(in); },
  };
  const std::vector<bench::Stats> st =
      bench::time_interleaved(variants, warmup, iters, /*comm_world=*/true, /*shuffled=*/true);
  // Each part of a step is the slowest rank's, as the step times are.
  auto max_over_ranks = [](double v) {
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return v;
  };
  const double kernel_median = max_over_ranks(bench::stats_of(kernel_seconds).median);
  const double free_median = max_over_ranks(bench::stats_of(free_seconds).median);
  const double fw_replay = max_over_ranks(bench::stats_of(replay_overhead).median);

  // Host scalars are compared across ranks on each call of a step compiled with scalars (one
  // all-gather of three words per input mesh): a one-op step replayed with a scalar vs the same
  // step compiled without.
  const dt::DTensorList small = {dt::distribute_tensor(dt::ones({4, 4}), mesh, {dt::Replicate()})};
  dt::CompiledScalarStep with_scalar =
      dt::compile([](const dt::DTensorList& x,
                     const std::vector<double>& s) { return dt::DTensorList{dt::mul(x[0], s[0])}; },
                  dt::CompileOptions{});
  dt::CompiledStep without_scalar =
      dt::compile([](const dt::DTensorList& x) { return dt::DTensorList{dt::mul(x[0], 2.0)}; },
                  dt::CompileOptions{});
  const std::vector<bench::Stats> agree = bench::time_interleaved(
      {[&] { with_scalar(small, {2.0}); }, [&] { without_scalar(small); }}, warmup, 10 * iters,
      /*comm_world=*/true, /*shuffled=*/true);

  // Same steps: bit-identical parameters.
  int differ = 0;
  const auto a = eager.model.named_parameters();
  for (const Model* other : {&compiled, &scheduled}) {
    const auto b = other->model.named_parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      const dt::Tensor x = a[i].second.to_local(), y = b[i].second.to_local();
      const auto d = dt::max(dt::abs(dt::sub(x, y))).to(dt::kFloat64).item<double>();
      if (d != 0) differ = 1;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &differ, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

  // Memory on this rank: the eager step's peak of held bytes beyond those held before it, the
  // replay's, and what the replay's graph keeps between replays (cached, not held).
  const auto held_peak_of = [](const std::function<void()>& f) {
    dt::reset_peak_memory_stats();
    const int64_t before = dt::memory_stats().current_bytes;
    f();
    return dt::memory_stats().peak_bytes - before;
  };
  const int64_t eager_peak = held_peak_of([&] { eager.step(in); });
  const int64_t replay_peak = held_peak_of([&] { step(in); });
  const int64_t kept = step.graph().kept_bytes();

  const double fw_eager = st[0].median - kernel_median;
  const double eager_minus_replay = st[0].median - st[1].median;

  const dt::compiler::GraphStats& gs = step.graph().stats();
  bench::JsonLines json("bench_compile", flags.str("json", ""));
  bench::print0(
      "# bench_compile: TP transformer (dim %lld, %lld layers, %lld heads, vocab %lld, RMSNorm, "
      "SwiGLU), %lld x %lld tokens, AdamW; %d rank(s); median of %lld steps (max over ranks)\n",
      (long long)cfg.dim, (long long)cfg.n_layers, (long long)cfg.n_heads,
      (long long)cfg.vocab_size, (long long)batch, (long long)seq, world, (long long)iters);
  bench::print0("%-8s %10s %10s %10s %14s\n", "variant", "median_ms", "p10_ms", "p90_ms",
                "framework_ms");
  bench::print0("%-8s %10.3f %10.3f %10.3f %14.3f\n", "eager", st[0].median * 1e3, st[0].p10 * 1e3,
                st[0].p90 * 1e3, fw_eager * 1e3);
  bench::print0("%-8s %10.3f %10.3f %10.3f %14.3f\n", "replay", st[1].median * 1e3, st[1].p10 * 1e3,
                st[1].p90 * 1e3, fw_replay * 1e3);
  bench::print0("%-8s %10.3f %10.3f %10.3f %14s\n", "sched", st[2].median * 1e3, st[2].p10 * 1e3,
                st[2].p90 * 1e3, "-");
  bench::print0(
      "kernel time %.3f ms, free time in replay %.3f ms (part of its framework time); framework "
      "time removed by replay: %.1f%%; eager - replay: %.3f ms per step; graph %lld nodes, "
      "collectives per step %lld (%lld without dedup); parameters %s\n",
      kernel_median * 1e3, free_median * 1e3,
      fw_eager > 0 ? 100.0 * (1.0 - fw_replay / fw_eager) : 0.0, eager_minus_replay * 1e3,
      (long long)step.graph().nodes().size(), (long long)gs.collectives,
      (long long)step_no_dedup.graph().stats().collectives,
      differ == 0 ? "bit-identical" : "DIFFERENT");
  bench::print0(
      "host-scalar agreement: a one-op step replayed with 1 host scalar %.1f us, without %.1f us "
      "(%+.1f us per call)\n",
      agree[0].median * 1e6, agree[1].median * 1e6, (agree[0].median - agree[1].median) * 1e6);
  bench::print0(
      "memory (rank 0): held beyond the step's start at its peak: eager %lld B, replay %lld B; "
      "kept by the graph between replays %lld B (%.2fx the eager peak)\n",
      (long long)eager_peak, (long long)replay_peak, (long long)kept,
      eager_peak > 0 ? static_cast<double>(kept) / static_cast<double>(eager_peak) : 0.0);
  json.write(json.record("compile")
                 .add("ranks", world)
                 .add("dim", cfg.dim)
                 .add("layers", cfg.n_layers)
                 .add_stats("eager", st[0])
                 .add_stats("replay", st[1])
                 .add_stats("scheduled", st[2])
                 .add("kernel_seconds", kernel_median)
                 .add("free_seconds", free_median)
                 .add("framework_eager_seconds", fw_eager)
                 .add("framework_replay_seconds", fw_replay)
                 .add("eager_minus_replay_seconds", eager_minus_replay)
                 .add("scalar_step_seconds", agree[0].median)
                 .add("no_scalar_step_seconds", agree[1].median)
                 .add("nodes", static_cast<int64_t>(step.graph().nodes().size()))
                 .add("collectives", gs.collectives)
                 .add("collectives_no_dedup", step_no_dedup.graph().stats().collectives)
                 .add("eager_peak_bytes", eager_peak)
                 .add("replay_peak_bytes", replay_peak)
                 .add("kept_bytes", kept));
  return differ == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
