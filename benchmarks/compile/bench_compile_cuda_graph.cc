// A compiled step replayed as one CUDA graph (CompileOptions::cuda_graph, issue 42 item 6) vs
// plain replay vs the eager step: the main example's model (bench_compile's tensor-parallel
// transformer, default size: small, so launch overhead dominates) on one rank, the three trained
// from the same weights on the same batch, interleaved:
//
//   mpirun -np 1 bench_compile_cuda_graph [--dim 64] [--layers 2] [--heads 4] [--vocab 16]
//       [--batch 32] [--seq 15] [--iters 30] [--warmup 3] [--cpu] [--nll] [--json FILE]
//
// The loss is cross-entropy from device-side ops on one-hot targets (log_softmax, product, sum,
// mean) unless --nll: dtensor::cross_entropy's CUDA path reads its loss sum on the host, which
// keeps the step from being captured.
//
// On the GPU by default (--cpu, or no CUDA device: on the CPU, where the graph variant falls
// back to plain replays and says why). Each step ends by reading its loss on the host (the
// synchronisation a training loop makes), so a step's time includes its device work. Prints the
// median step times, the CUDA-graph status (captured, or the reason it fell back), and fails
// unless the three models' parameters are bit-identical at the end.
#include <mpi.h>

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
  DT_CHECK(dt::world_size() == 1, "[bench_compile_cuda_graph] runs on one rank, not %d",
           dt::world_size());
  const nn::TransformerConfig cfg = bench::compile_bench_config(flags);
  const int64_t batch = flags.i64("batch", 32), seq = cfg.max_seq_len - 1;
  const int64_t iters = flags.i64("iters", 30), warmup = flags.i64("warmup", 3);
  const bool on_gpu = !flags.has("cpu") && dt::cuda_available();
  const dt::Device device = on_gpu ? dt::Device(dt::kCUDA, dt::local_cuda_device()) : dt::Device();
  const dt::DeviceMesh mesh = dt::init_device_mesh(device.type, {1}, {"tp"});

  // The loss from device-side ops by default (cross_entropy's CUDA path reads the host, which
  // keeps a step from being captured); --nll: cross_entropy itself.
  const bool onehot = !flags.has("nll");
  Model eager(cfg, mesh, device, onehot), replayed(cfg, mesh, device, onehot),
      graphed(cfg, mesh, device, onehot);
  dt::CompiledStep replay =
      dt::compile([&](const dt::DTensorList& in) { return replayed.step(in); });
  dt::CompileOptions options;
  options.cuda_graph = true;
  dt::CompiledStep graph =
      dt::compile([&](const dt::DTensorList& in) { return graphed.step(in); }, options);

  const dt::DTensorList in = bench::compile_bench_batch(cfg, batch, mesh, device, onehot);
  // Each step's loss read on the host: the step's device work is inside its time.
  auto host_loss = [](const dt::DTensorList& out) {
    return out[0].full_tensor().to(dt::kFloat64).to(dt::Device()).item<double>();
  };
  const std::vector<bench::Stats> st =
      bench::time_interleaved({[&] { host_loss(eager.step(in)); }, [&] { host_loss(replay(in)); },
                               [&] { host_loss(graph(in)); }},
                              warmup, iters, /*comm_world=*/true, /*shuffled=*/true);

  int differ = 0;
  const auto a = eager.model.named_parameters();
  for (const Model* other : {&replayed, &graphed}) {
    const auto b = other->model.named_parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      if (!dt::equal(a[i].second.to_local().to(dt::Device()),
                     b[i].second.to_local().to(dt::Device()))) {
        differ = 1;
      }
    }
  }
  const std::string status = graph.cuda_graph_status();
  bench::JsonLines json("bench_compile_cuda_graph", flags.str("json", ""));
  bench::print0(
      "# bench_compile_cuda_graph: TP transformer (dim %lld, %lld layers, %lld heads, vocab %lld, "
      "RMSNorm, SwiGLU), %lld x %lld tokens, %s, AdamW, 1 rank on %s; median of %lld steps, "
      "each ending with the loss read on the host\n",
      (long long)cfg.dim, (long long)cfg.n_layers, (long long)cfg.n_heads,
      (long long)cfg.vocab_size, (long long)batch, (long long)seq,
      onehot ? "cross-entropy from device-side ops" : "cross_entropy", device.str().c_str(),
      (long long)iters);
  bench::print0("%-11s %10s %10s %10s\n", "variant", "median_ms", "p10_ms", "p90_ms");
  const char* names[] = {"eager", "replay", "cuda_graph"};
  for (size_t v = 0; v < st.size(); ++v) {
    bench::print0("%-11s %10.3f %10.3f %10.3f\n", names[v], st[v].median * 1e3, st[v].p10 * 1e3,
                  st[v].p90 * 1e3);
  }
  bench::print0("cuda_graph_status: %s\nparameters %s\n", status.c_str(),
                differ == 0 ? "bit-identical" : "DIFFERENT");
  json.write(json.record("compile_cuda_graph")
                 .add("device", device.str())
                 .add("loss", onehot ? "onehot" : "cross_entropy")
                 .add("dim", cfg.dim)
                 .add("layers", cfg.n_layers)
                 .add_stats("eager", st[0])
                 .add_stats("replay", st[1])
                 .add_stats("cuda_graph", st[2])
                 .add("cuda_graph_status", status)
                 .add("bit_identical", static_cast<int64_t>(differ == 0)));
  return differ == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
