// Data-parallel training step (forward + backward + SGD) of a small transformer: replicate
// (DDP buckets) and fully_shard (FSDP, one unit per TransformerBlock; with and without
// prefetching) vs a hand-written MPI data-parallel step (the same local forward/backward,
// then every gradient packed into one
// buffer, one MPI_Allreduce, divided by the rank count, unpacked, SGD). Run at each rank count:
//
//   mpirun -np N bench_dp [--dim 128] [--layers 4] [--batch 4] [--seq 32] [--iters 20]
//                         [--warmup 2] [--bucket-bytes 1048576] [--json FILE]
//
// Times: median over iterations of the max over ranks (variants interleaved, shuffled). Every
// variant takes the same steps on the same per-rank batches from the same weights; the weights
// are compared after the run (exit 1 when they differ).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/collectives/comm_worker.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/memory_stats.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace bench = dtensor::bench;

namespace {

constexpr double kLr = 1e-3;

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  nn::TransformerConfig cfg;
  cfg.dim = flags.i64("dim", 128);
  cfg.n_layers = flags.i64("layers", 4);
  cfg.n_heads = 4;
  cfg.vocab_size = 256;
  const int64_t batch = flags.i64("batch", 4), seq = flags.i64("seq", 32);
  const int64_t iters = flags.i64("iters", 20), warmup = flags.i64("warmup", 2);
  const int world = dt::world_size(), rank = dt::world_rank();

  dt::manual_seed(3);
  nn::Transformer ddp(cfg);
  dt::manual_seed(3);
  nn::Transformer fsdp(cfg);
  dt::manual_seed(3);
  nn::Transformer hand(cfg);
  dt::manual_seed(3);
  nn::Transformer ddp_inline(cfg);  // replicate with async operations inline (no overlap)
  dt::manual_seed(3);
  nn::Transformer local(cfg);  // no communication at all: the compute-only step
  dt::manual_seed(3);
  nn::Transformer fsdp_plain(cfg);  // fully_shard without prefetching
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {world}, {"dp"});
  // Buckets of 1 MB (DDP's default is 25 MB): this small model's gradients (~3.6 MB) then
  // fill several buckets, launched during the backward as a larger model's would be.
  const int64_t bucket = flags.i64("bucket-bytes", int64_t{1} << 20);
  dt::replicate(ddp, mesh, {.bucket_cap_bytes = bucket});
  dt::replicate(ddp_inline, mesh, {.bucket_cap_bytes = bucket});
  dt::fully_shard(fsdp, mesh, {.grouping = {.module_types = {"TransformerBlock"}}});
  dt::fully_shard(fsdp_plain, mesh,
                  {.grouping = {.module_types = {"TransformerBlock"}}, .prefetch = false});
  dt::optim::SGD opt_ddp(ddp.parameters(), dt::optim::SGDOptions(kLr));
  dt::optim::SGD opt_fsdp(fsdp.parameters(), dt::optim::SGDOptions(kLr));
  dt::optim::SGD opt_hand(hand.parameters(), dt::optim::SGDOptions(kLr));
  dt::optim::SGD opt_inline(ddp_inline.parameters(), dt::optim::SGDOptions(kLr));
  dt::optim::SGD opt_local(local.parameters(), dt::optim::SGDOptions(kLr));
  dt::optim::SGD opt_plain(fsdp_plain.parameters(), dt::optim::SGDOptions(kLr));

  // This rank's batch (different on every rank).
  dt::Generator gen(100 + static_cast<uint64_t>(rank));
  const dt::Tensor tokens =
      dt::randint(0, cfg.vocab_size, {batch, seq}, dt::TensorOptions(dt::kInt64), &gen);
  const dt::Tensor targets =
      dt::randint(0, cfg.vocab_size, {batch * seq}, dt::TensorOptions(dt::kInt64), &gen);
  auto forward_backward = [&](nn::Module& m) {
    const int64_t rows[] = {-1, cfg.vocab_size};
    dt::cross_entropy(dt::reshape(m(nn::local_dtensor(tokens)), rows), nn::local_dtensor(targets))
        .backward();
  };
  auto dp_step = [&](nn::Module& m, dt::optim::Optimizer& o) {
    o.zero_grad();
    forward_backward(m);
    o.step();
  };
  auto hand_step = [&] {
    opt_hand.zero_grad();
    forward_backward(hand);
    const std::vector<dt::DTensor> params = hand.parameters();
    int64_t total = 0;
    for (const auto& p : params) total += p.numel();
    std::vector<float> flat(static_cast<size_t>(total));
    int64_t off = 0;
    for (const auto& p : params) {
      const float* g = p.grad().to_local().data<float>();
      std::copy(g, g + p.numel(), flat.begin() + off);
      off += p.numel();
    }
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    off = 0;
    for (const auto& p : params) {
      float* g = p.grad().to_local().data<float>();
      for (int64_t i = 0; i < p.numel(); ++i) g[i] = flat[off + i] / static_cast<float>(world);
      off += p.numel();
    }
    opt_hand.step();
  };
  // The async variants run their gradient reductions on the communication thread
  // (dtensor/collectives/comm_worker.h); "replicate, inline" runs the same step with them inline,
  // and "compute only" takes the local step with no reduction: exposed communication = a variant's
  // step - the compute-only step.
  const bool threaded = dt::async_threaded();
  auto inline_step = [&] {
    dt::set_async_threaded(false);
    dp_step(ddp_inline, opt_inline);
    dt::set_async_threaded(threaded);
  };
  auto local_step = [&] {
    opt_local.zero_grad();
    forward_backward(local);
    opt_local.step();
  };
  const std::vector<std::function<void()>> variants = {[&] { dp_step(ddp, opt_ddp); },
                                                       [&] { dp_step(fsdp, opt_fsdp); },
                                                       hand_step,
                                                       inline_step,
                                                       local_step,
                                                       [&] { dp_step(fsdp_plain, opt_plain); }};
  const std::vector<bench::Stats> st =
      bench::time_interleaved(variants, warmup, iters, /*comm_world=*/true, /*shuffled=*/true);

  double diff = 0;
  const auto a = ddp.named_parameters(), b = fsdp.named_parameters(), h = hand.named_parameters();
  const auto c = ddp_inline.named_parameters(), f = fsdp_plain.named_parameters();
  for (size_t i = 0; i < h.size(); ++i) {
    const auto want = h[i].second.to_local().to(dt::kFloat64).to_vector<double>();
    for (const auto* m : {&a, &b, &c, &f}) {
      const auto got = (*m)[i].second.full_tensor().to(dt::kFloat64).to_vector<double>();
      for (size_t j = 0; j < got.size(); ++j) diff = std::max(diff, std::abs(got[j] - want[j]));
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &diff, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

  // Memory per rank (dtensor/tensor/memory_stats.h), measured after the weight check (these extra
  // steps are not taken by every variant): the parameters each rank stores between steps, and
  // the peak of one step above its start (activations, gradients, gathered parameters and
  // reduction buffers; the compute-only step has the activations and whole gradients alone).
  auto step_peak = [](dt::optim::Optimizer& o, const std::function<void()>& step) {
    o.zero_grad();  // measured from a start without gradients, for every variant alike
    const int64_t base = dt::memory_stats().current_bytes;
    dt::reset_peak_memory_stats();
    step();
    int64_t peak = dt::memory_stats().peak_bytes - base;
    MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    return peak;
  };
  auto stored = [](const nn::Module& m) {
    int64_t bytes = 0;
    for (const auto& p : m.parameters()) bytes += static_cast<int64_t>(p.to_local().nbytes());
    MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    return bytes;
  };
  const int64_t peak_ddp = step_peak(opt_ddp, variants[0]),
                peak_fsdp = step_peak(opt_fsdp, variants[1]),
                peak_local = step_peak(opt_local, variants[4]);

  int64_t n_params = 0;
  for (const auto& p : hand.parameters()) n_params += p.numel();
  bench::JsonLines json("bench_dp", flags.str("json", ""));
  bench::print0(
      "# bench_dp: transformer dim %lld, %lld layers, %lld parameters, %lld x %lld tokens per "
      "rank, float32, SGD; %d rank(s); median of %lld steps (max over ranks)\n",
      (long long)cfg.dim, (long long)cfg.n_layers, (long long)n_params, (long long)batch,
      (long long)seq, world, (long long)iters);
  bench::print0("%-14s %10s %10s %10s %8s\n", "variant", "median_ms", "p10_ms", "p90_ms",
                "vs_hand");
  const char* names[] = {"replicate",        "fully_shard",  "hand-written",
                         "replicate-inline", "compute-only", "fsdp-no-prefetch"};
  for (size_t i = 0; i < st.size(); ++i) {
    bench::print0("%-16s %10.2f %10.2f %10.2f %8.3f\n", names[i], st[i].median * 1e3,
                  st[i].p10 * 1e3, st[i].p90 * 1e3, st[i].median / st[2].median);
  }
  // Exposed communication of replicate with and without the communication thread.
  const double exposed_async = std::max(0.0, st[0].median - st[4].median);
  const double exposed_inline = std::max(0.0, st[3].median - st[4].median);
  const double hidden = exposed_inline > 0 ? 1.0 - exposed_async / exposed_inline : 0.0;
  bench::print0(
      "exposed communication (step - compute-only): replicate %.2f ms async (communication "
      "thread: %s), %.2f ms inline; hidden %.0f%%\n",
      exposed_async * 1e3, threaded ? "on" : "off", exposed_inline * 1e3, hidden * 100);
  bench::print0("weights max |diff| vs hand-written %.3g (targets: ratio <= 1.05)\n", diff);
  {
    auto rec = json.record("async_overlap");
    rec.add("ranks", world)
        .add("step_async_ms", st[0].median * 1e3)
        .add("step_inline_ms", st[3].median * 1e3)
        .add("compute_only_ms", st[4].median * 1e3)
        .add("exposed_async_ms", exposed_async * 1e3)
        .add("exposed_inline_ms", exposed_inline * 1e3)
        .add("hidden_fraction", hidden)
        .add("threaded", threaded ? 1 : 0);
    json.write(rec);
  }
  bench::print0(
      "memory per rank: parameters stored %lld B (replicate) / %lld B (fully_shard) of %lld B; "
      "step peak above its start %lld B (replicate) / %lld B (fully_shard) / %lld B "
      "(compute only)\n",
      (long long)stored(ddp), (long long)stored(fsdp), (long long)(n_params * 4),
      (long long)peak_ddp, (long long)peak_fsdp, (long long)peak_local);
  {
    auto rec = json.record("memory");
    rec.add("ranks", world)
        .add("total_param_bytes", n_params * 4)
        .add("replicate_stored_bytes", stored(ddp))
        .add("fsdp_stored_bytes", stored(fsdp))
        .add("replicate_step_peak_bytes", peak_ddp)
        .add("fsdp_step_peak_bytes", peak_fsdp)
        .add("compute_only_step_peak_bytes", peak_local);
    json.write(rec);
  }
  for (size_t i = 0; i < 2; ++i) {
    auto rec = json.record(names[i]);
    rec.add("ranks", world)
        .add("dim", cfg.dim)
        .add("layers", cfg.n_layers)
        .add("tokens_per_rank", batch * seq)
        .add_stats("", st[i])
        .add("baseline", "hand-written MPI data-parallel step")
        .add_stats("baseline", st[2])
        .add("ratio_vs_baseline", st[i].median / st[2].median)
        .add("max_weight_diff", diff);
    json.write(rec);
  }
  return diff < 1e-3 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
