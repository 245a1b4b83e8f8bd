// Pipeline schedules side by side (issue 45 item 4): the measured bubble of GPipe, 1F1B and
// interleaved 1F1B (2 stages per rank) beside its theory, and the peak memory each pipeline
// rank holds during a step (activations kept for the backward: 1F1B keeps at most p - r
// microbatches in flight on rank r, GPipe all m). Run at pp = world:
//
//   mpirun -np P bench_pipeline [--dim 64] [--layers 8] [--seq 32] [--microbatch 2]
//                               [--iters 10] [--warmup 2] [--json FILE]
//
// The model is a chain of `layers` TransformerBlocks (float activations in, mean squared error
// out), so every stage does the same work for every schedule. For each schedule and m in {4, 8}
// microbatches of `microbatch` sequences: bubble = 1 - (sum over ranks of the time spent in the
// stage's forwards and backwards) / (ranks x step time), medians over the timed steps; theory:
// (p - 1) / (m + p - 1), (p - 1) / (v m + p - 1) interleaved; the schedule's own replay on the
// cost model (forward 1, backward 2) beside it. Memory: the CPU allocator's peak during the step
// above what was held before it, per rank. Every step's loss is checked against the first
// schedule's (exit 1 when they differ: the schedules compute the same gradients).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/pipeline/pipeline_schedule.h"
#include "dtensor/parallel/pipeline/split.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/memory_stats.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace pp = dtensor::pipelining;
namespace bench = dtensor::bench;

namespace {

struct Case {
  const char* schedule;
  int64_t stages_per_rank;
};
constexpr Case kCases[] = {{"GPipe", 1}, {"1F1B", 1}, {"Interleaved1F1B", 2}};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  nn::TransformerConfig cfg;
  cfg.dim = flags.i64("dim", 64);
  cfg.n_heads = 4;
  const int64_t layers = flags.i64("layers", 8), seq = flags.i64("seq", 32);
  const int64_t mb_size = flags.i64("microbatch", 2);
  const int64_t iters = flags.i64("iters", 10), warmup = flags.i64("warmup", 2);
  const int p = dt::world_size(), rank = dt::world_rank();
  bench::JsonLines json("pipeline", flags.str("json", ""));
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {p}, {"pp"});
  bench::print0(
      "pipeline: pp %d, %lld TransformerBlocks of dim %lld, microbatches of %lld x %lld\n", p,
      static_cast<long long>(layers), static_cast<long long>(cfg.dim),
      static_cast<long long>(mb_size), static_cast<long long>(seq));
  bench::print0("%-16s %3s %9s %9s %9s %12s %12s\n", "schedule", "m", "bubble", "theory", "replay",
                "step ms", "peak MiB r0");
  bool ok = true;
  for (int64_t m : {4, 8}) {
    std::vector<double> reference;  // the first schedule's losses
    for (const Case& c : kCases) {
      const int64_t n_stages = p * c.stages_per_rank;
      if (layers < n_stages) continue;
      dt::manual_seed(5);
      auto model = std::make_shared<nn::ModuleList>();
      for (int64_t i = 0; i < layers; ++i)
        model->append(std::make_shared<nn::TransformerBlock>(cfg));
      const auto modules = pp::pipeline_split(model, n_stages);
      std::vector<std::shared_ptr<pp::PipelineStage>> stages;
      std::vector<dt::DTensor> params;
      for (int64_t j = 0; j < c.stages_per_rank; ++j) {
        const int64_t s = j * p + rank;
        stages.push_back(std::make_shared<pp::PipelineStage>(modules[s], s, n_stages, mesh));
        for (const dt::DTensor& prm : modules[s]->parameters()) params.push_back(prm);
      }
      auto schedule = pp::make_schedule(c.schedule, stages, m,
                                        [](const dt::DTensor& out, const dt::DTensor& target) {
                                          return dt::mse_loss(out, target);
                                        });
      dt::optim::SGD opt(params, dt::optim::SGDOptions(1e-3));
      std::vector<double> busy, wall, peak, losses;
      for (int64_t it = 0; it < warmup + iters; ++it) {
        dt::Generator g(100 + it);
        const dt::Tensor x = dt::randn({m * mb_size, seq, cfg.dim}, {}, &g);
        const dt::Tensor y = dt::randn({m * mb_size, seq, cfg.dim}, {}, &g);
        opt.zero_grad();
        const int64_t before = dt::memory_stats().current_bytes;
        dt::reset_peak_memory_stats();
        MPI_Barrier(MPI_COMM_WORLD);
        const double loss = schedule->step(nn::local_dtensor(x), nn::local_dtensor(y));
        const int64_t held = dt::memory_stats().peak_bytes - before;
        opt.step();
        losses.push_back(loss);
        if (it < warmup) continue;
        // Per step: the busy time summed over ranks, the step time the slowest rank saw.
        double mine[2] = {schedule->last_step_stats().compute_seconds,
                          schedule->last_step_stats().wall_seconds};
        double sum_busy = 0, max_wall = 0;
        MPI_Allreduce(&mine[0], &sum_busy, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(&mine[1], &max_wall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        busy.push_back(sum_busy);
        wall.push_back(max_wall);
        peak.push_back(static_cast<double>(held));
      }
      if (reference.empty()) {
        reference = losses;
      } else {
        for (size_t i = 0; i < losses.size(); ++i) {
          ok &= std::abs(losses[i] - reference[i]) <= 1e-4 * (1 + std::abs(reference[i]));
        }
      }
      std::vector<double> bubbles;
      for (size_t i = 0; i < busy.size(); ++i) bubbles.push_back(1 - busy[i] / (p * wall[i]));
      const double bubble = median(bubbles);
      const double theory = pp::theoretical_bubble(p, m, c.stages_per_rank);
      const pp::Simulation sim = pp::simulate(schedule->order(), n_stages);
      // Peak memory per rank (the max over steps), gathered for the record.
      const double my_peak = *std::max_element(peak.begin(), peak.end());
      std::vector<double> peaks(static_cast<size_t>(p));
      MPI_Allgather(&my_peak, 1, MPI_DOUBLE, peaks.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
      bench::print0("%-16s %3lld %9.3f %9.3f %9.3f %12.2f %12.2f\n", c.schedule,
                    static_cast<long long>(m), bubble, theory, sim.bubble, 1e3 * median(wall),
                    peaks[0] / (1 << 20));
      auto rec = json.record(std::string(c.schedule) + ".m" + std::to_string(m));
      rec.add("schedule", c.schedule)
          .add("pp", p)
          .add("stages_per_rank", c.stages_per_rank)
          .add("microbatches", m)
          .add("bubble", bubble)
          .add("bubble_theory", theory)
          .add("bubble_replay", sim.bubble)
          .add("step_ms", 1e3 * median(wall));
      for (int r = 0; r < p; ++r) {
        rec.add("peak_mib_rank" + std::to_string(r), peaks[static_cast<size_t>(r)] / (1 << 20));
        rec.add("in_flight_rank" + std::to_string(r), sim.peak_in_flight[static_cast<size_t>(r)]);
      }
      json.write(rec);
    }
  }
  if (!ok) bench::print0("pipeline: the schedules' losses differ\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
