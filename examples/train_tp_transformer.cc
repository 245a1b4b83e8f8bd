// Training, tensor-parallel: a small decoder-only transformer learns to copy random token
// sequences, sharded over every rank with the Megatron plan (colwise q/k/v and MLP-in, rowwise
// o and MLP-out, vocab-sharded embedding) and loss parallel (the lm head's logits stay sharded
// over the vocabulary; cross_entropy never gathers them).
//
//   mpirun -np 4 ./train_tp_transformer --steps 300 --lr 3e-3
//   mpirun -np 4 ./train_tp_transformer --dp 2     # 2x2 mesh: FSDP over dp x TP over tp
//
// With --dp N the ranks form an N x (world / N) mesh ("dp", "tp"): the model is parallelized
// on tp, then fully_shard over dp with one unit per TransformerBlock; each dp rank trains on
// its 1/N of the batch and the losses are averaged over dp (equal to the global-batch loss).
//
// Each sequence is n random tokens followed by the same n tokens; the loss scores the second
// half (the first half is unpredictable). Every rank also trains the same model on one device
// for the first --compare-steps steps, on the same batches, and the two loss curves must agree
// within --tol. Rank 0 prints the plan, the collectives of one step, and a progress line every
// --log-every steps. Exit status 0 when the curves agree and the final loss (mean of the last
// 10 steps) is below --threshold; 1 otherwise.
//
// Checkpoints (docs/CHECKPOINT.md): --save-every K --ckpt DIR saves the model, the AdamW state
// and the step count to DIR every K steps (replacing the previous one atomically); --resume DIR
// continues from such a checkpoint, at any rank count (the shards are re-cut on load):
//
//   mpirun -np 4 ./train_tp_transformer --steps 100 --save-every 50 --ckpt run1
//   mpirun -np 2 ./train_tp_transformer --steps 300 --resume run1
//
// --compile (docs/guides/compiling_a_step.md) trains from a compiled step: the first step is
// captured while it runs, the others replay the graph. A second model parallelized alike
// (tensor parallel, and fully_shard with --dp) trained eagerly on the same batches for the first
// --compare-steps steps must give the same losses bit for bit.
#include <dtensor/dtensor.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dt = dtensor;
namespace nn = dtensor::nn;

namespace {

struct Args {
  int64_t layers = 2, dim = 64, heads = 4, vocab = 16, half = 8, batch = 32, hidden = 0;
  int64_t steps = 300, log_every = 20, compare_steps = 10, dp = 1;
  double lr = 3e-3, threshold = 0.3, tol = -1;  // tol: 2e-3, or 2e-2 under a 16-bit --param-dtype
  uint64_t seed = 1234;
  int64_t save_every = 0;
  std::string ckpt, resume;
  std::string param_dtype, reduce_dtype;  // --dp only: FSDP mixed precision (empty: none)
  bool cuda = false;     // --cuda: both models, the batches and the mesh on this rank's GPU
  bool compile = false;  // --compile: train from dtensor::compile's replay
};

// "float32", "float64", "bfloat16", "float16" -> the dtype; nullopt for "" (not given).
std::optional<dt::DType> dtype_flag(const std::string& name) {
  if (name.empty()) return std::nullopt;
  for (dt::DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16, dt::kFloat16}) {
    if (name == dt::dtype_name(d)) return d;
  }
  DT_FAIL(
      "[train_tp_transformer] unknown dtype '%s' (expected float32, float64, bfloat16 or "
      "float16)",
      name);
}

const char* kUsage =
    "usage: train_tp_transformer [--layers N] [--dim N] [--heads N] [--vocab N] [--half N]\n"
    "                            [--batch N] [--hidden N] [--steps N] [--lr X] [--log-every N]\n"
    "                            [--compare-steps N] [--threshold X] [--tol X] [--seed N]\n"
    "                            [--save-every K --ckpt DIR] [--resume DIR] [--dp N]\n"
    "                            [--param-dtype T] [--reduce-dtype T] [--cuda] [--compile]\n"
    "  trains a transformer tensor-parallel over every rank to copy sequences of --half random\n"
    "  tokens (vocabulary --vocab); checks the loss falls below --threshold and that the first\n"
    "  --compare-steps losses equal single-device training within --tol (relative).\n"
    "  --save-every K --ckpt DIR: checkpoint every K steps; --resume DIR: continue from one\n"
    "  (saved at any rank count). --dp N: an N x (ranks / N) dp x tp mesh, fully_shard over dp;\n"
    "  with --param-dtype T (bfloat16, float16, float32, float64) its forward and backward\n"
    "  compute in T over float32 shards, gradients reduced in --reduce-dtype (default T); the\n"
    "  comparison with the float32 single-device run then defaults to --tol 2e-2 for 16-bit T.\n"
    "  --cuda: everything on the GPU (local_rank % devices) when dtensor has CUDA and a device\n"
    "  is visible, else a note and the CPU.\n"
    "  --compile: train from a compiled step (captured once, then replayed); its first\n"
    "  --compare-steps losses must equal an eager run's (same parallelization) bit for bit.\n";

// Parses flags; returns 0 to run, 1 after --help, 2 on a bad flag.
int parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--help" || f == "-h") return 1;
    if (f == "--cuda") {
      a.cuda = true;
      continue;
    }
    if (f == "--compile") {
      a.compile = true;
      continue;
    }
    if (i + 1 >= argc) return 2;
    const char* v = argv[++i];
    if (f == "--layers")
      a.layers = std::atoll(v);
    else if (f == "--dim")
      a.dim = std::atoll(v);
    else if (f == "--heads")
      a.heads = std::atoll(v);
    else if (f == "--vocab")
      a.vocab = std::atoll(v);
    else if (f == "--half")
      a.half = std::atoll(v);
    else if (f == "--batch")
      a.batch = std::atoll(v);
    else if (f == "--hidden")
      a.hidden = std::atoll(v);
    else if (f == "--steps")
      a.steps = std::atoll(v);
    else if (f == "--dp")
      a.dp = std::atoll(v);
    else if (f == "--log-every")
      a.log_every = std::max<int64_t>(1, std::atoll(v));
    else if (f == "--compare-steps")
      a.compare_steps = std::atoll(v);
    else if (f == "--lr")
      a.lr = std::atof(v);
    else if (f == "--threshold")
      a.threshold = std::atof(v);
    else if (f == "--tol")
      a.tol = std::atof(v);
    else if (f == "--seed")
      a.seed = std::strtoull(v, nullptr, 10);
    else if (f == "--save-every")
      a.save_every = std::atoll(v);
    else if (f == "--ckpt")
      a.ckpt = v;
    else if (f == "--resume")
      a.resume = v;
    else if (f == "--param-dtype")
      a.param_dtype = v;
    else if (f == "--reduce-dtype")
      a.reduce_dtype = v;
    else
      return 2;
  }
  const bool ckpt_ok = a.save_every >= 0 && (a.save_every == 0) == a.ckpt.empty();
  const bool mixed_ok = a.dp > 1 || (a.param_dtype.empty() && a.reduce_dtype.empty());
  if (a.tol < 0) {  // not given: the single-device reference computes in float32
    a.tol = a.param_dtype == "bfloat16" || a.param_dtype == "float16" ? 2e-2 : 2e-3;
  }
  return a.vocab >= 3 && a.half >= 1 && a.batch >= 1 && a.steps >= 1 && ckpt_ok && a.dp >= 1 &&
                 a.batch % a.dp == 0 && mixed_ok
             ? 0
             : 2;
}

// One batch (the same on every rank): inputs [B, 2n - 1] and targets [B * (2n - 1)], the
// targets of the first n - 1 positions ignored (-100).
struct Batch {
  dt::Tensor inputs, targets;
};

Batch make_batch(const Args& a, int64_t step) {
  dt::Generator gen(a.seed * 1000003 + static_cast<uint64_t>(step));
  const dt::Tensor half =
      dt::randint(1, a.vocab, {a.batch, a.half}, dt::TensorOptions(dt::kInt64), &gen);
  const dt::Tensor seq = dt::cat({half, half}, 1);  // [B, 2n]
  const int64_t len = 2 * a.half - 1;
  Batch b;
  b.inputs = seq.narrow(1, 0, len).contiguous();
  dt::Tensor targets = seq.narrow(1, 1, len).contiguous();
  auto t = targets.data<int64_t>();
  for (int64_t r = 0; r < a.batch; ++r) {
    for (int64_t p = 0; p < a.half - 1; ++p) t[r * len + p] = -100;
  }
  const int64_t flat[] = {a.batch * len};
  b.targets = targets.reshape(flat);
  return b;
}

// The batch as the step's DTensor inputs: tokens and targets, replicated on `mesh` (local
// without one).
dt::DTensorList step_inputs(const Batch& host_batch, const dt::DeviceMesh* mesh,
                            const dt::Device& device) {
  const Batch batch{host_batch.inputs.to(device), host_batch.targets.to(device)};
  if (mesh == nullptr) {
    return {nn::local_dtensor(batch.inputs), nn::local_dtensor(batch.targets)};
  }
  const dt::Placements replicated(static_cast<size_t>(mesh->ndim()), dt::Replicate());
  return {nn::local_dtensor(batch.inputs),
          dt::DTensor::from_local(batch.targets, *mesh, replicated)};
}

// One training step of `model` on the step's inputs; returns the loss (what --compile
// captures).
dt::DTensorList train_step_on(nn::Module& model, dt::optim::Optimizer& opt,
                              const dt::DTensorList& in) {
  opt.zero_grad();
  const dt::DTensor logits = model(in[0]);  // [B, L, V]
  const int64_t rows[] = {-1, logits.size(-1)};
  const dt::DTensor loss = dt::cross_entropy(dt::reshape(logits, rows), in[1]);
  loss.backward();
  opt.step();
  return {loss.detach()};
}

double loss_value(const dt::DTensor& loss) {
  return loss.full_tensor().to(dt::kFloat64).item<double>();
}

// One training step of `model`; returns the loss.
double train_step(nn::Module& model, dt::optim::Optimizer& opt, const Batch& host_batch,
                  const dt::DeviceMesh* mesh, const dt::Device& device) {
  return loss_value(train_step_on(model, opt, step_inputs(host_batch, mesh, device))[0]);
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  const int rank = dt::world_rank();
  const int world = dt::world_size();
  Args a;
  const int parsed = parse(argc, argv, a);
  if (parsed != 0) {
    if (rank == 0) (parsed == 1 ? std::cout : std::cerr) << kUsage;  // --help: stdout, exit 0
    return parsed == 1 ? 0 : 2;
  }
  try {
    nn::TransformerConfig cfg;
    cfg.vocab_size = a.vocab;
    cfg.dim = a.dim;
    cfg.n_layers = a.layers;
    cfg.n_heads = a.heads;
    cfg.hidden_dim = a.hidden;
    cfg.max_seq_len = 2 * a.half;
    cfg.norm = nn::NormKind::kRMSNorm;
    cfg.mlp = nn::MLPKind::kSwiGLU;

    dt::DeviceType dev_type = dt::kCPU;
    if (a.cuda) {
      if (dt::cuda_available()) {  // false without CUDA compiled in
        dev_type = dt::kCUDA;
      } else if (rank == 0) {
        std::printf("--cuda: no CUDA device or CUDA not compiled in; running on the CPU\n");
      }
    }
    nn::ModuleOptions opts;
    if (dev_type == dt::kCUDA) opts.device = dt::Device(dt::kCUDA, dt::local_cuda_device());

    // The same seed gives both models the same full weights on every rank.
    dt::manual_seed(a.seed);
    nn::Transformer model(cfg, opts);
    dt::manual_seed(a.seed);
    nn::Transformer ref(cfg, opts);
    DT_CHECK(world % a.dp == 0, "[train_tp_transformer] --dp %d does not divide %d ranks", a.dp,
             world);
    const dt::DeviceMesh mesh2d =
        dt::init_device_mesh(dev_type, {a.dp, world / a.dp}, {"dp", "tp"});
    const dt::DeviceMesh mesh = mesh2d[{"tp"}];
    const dt::ParallelizePlan plan = dt::transformer_tp_plan({.loss_parallel = true});
    dt::parallelize_module(model, mesh, plan);
    const dt::DataParallelOptions fsdp{.grouping = {.module_types = {"TransformerBlock"}},
                                       .param_dtype = dtype_flag(a.param_dtype),
                                       .reduce_dtype = dtype_flag(a.reduce_dtype)};
    std::shared_ptr<dt::DataParallel> dp;
    if (a.dp > 1) dp = dt::fully_shard(model, mesh2d, fsdp);
    const int64_t dp_rank = mesh2d.get_local_rank(0);
    dt::optim::AdamW opt(model.parameters(), dt::optim::AdamWOptions(a.lr));
    dt::optim::AdamW ref_opt(ref.parameters(), dt::optim::AdamWOptions(a.lr));
    // --compile: the step captured once and replayed, and an eager tensor-parallel twin.
    std::unique_ptr<nn::Transformer> twin;
    std::unique_ptr<dt::optim::AdamW> twin_opt;
    std::optional<dt::CompiledStep> compiled;
    if (a.compile) {
      dt::manual_seed(a.seed);
      twin = std::make_unique<nn::Transformer>(cfg, opts);
      dt::parallelize_module(*twin, mesh, plan);
      if (a.dp > 1) dt::fully_shard(*twin, mesh2d, fsdp);
      twin_opt =
          std::make_unique<dt::optim::AdamW>(twin->parameters(), dt::optim::AdamWOptions(a.lr));
      compiled.emplace(
          dt::compile([&](const dt::DTensorList& in) { return train_step_on(model, opt, in); }));
    }

    // Resume: the model (resharded to this run's plan and rank count), AdamW's moments and step
    // count; the single-device reference loads the same checkpoint, whole.
    int64_t start = 0;
    if (!a.resume.empty()) {
      if (twin != nullptr) {
        dt::checkpoint::load_training_state(twin.get(), twin_opt.get(), nullptr, a.resume);
      }
      dt::checkpoint::load_training_state(&model, &opt, nullptr, a.resume);
      dt::checkpoint::load_training_state(&ref, &ref_opt, nullptr, a.resume);
      start = opt.step_count();
      if (rank == 0)
        std::printf("resumed from '%s' at step %lld\n", a.resume.c_str(), (long long)start);
    }

    int64_t n_params = 0;
    for (const auto& [name, p] : model.named_parameters()) n_params += p.numel();
    if (rank == 0) {
      std::printf(
          "train_tp_transformer: %d rank(s) on %s, layers=%lld dim=%lld heads=%lld vocab=%lld "
          "seq=%lld batch=%lld, %lld parameters, AdamW lr=%g\n",
          world, opts.device.str().c_str(), (long long)a.layers, (long long)a.dim,
          (long long)a.heads, (long long)a.vocab, (long long)(2 * a.half - 1), (long long)a.batch,
          (long long)n_params, a.lr);
      std::printf("%s\n", dt::config_str().c_str());  // version, GEMM library and kernel, threads
      std::printf("plan (mesh %s):\n", mesh.str().c_str());
      for (const auto& e : plan) std::printf("  %-26s %s\n", e.fqn.c_str(), e.style->str().c_str());
      if (dp != nullptr) {
        std::printf("fully_shard over dp (mesh %s), units:\n%s", mesh2d.str().c_str(),
                    dp->grouping_str().c_str());
      }
    }

    // The global-batch loss: the mean of the dp ranks' (equal-size) losses.
    auto global_loss = [&](double loss) {
      if (a.dp == 1) return loss;
      // On the mesh's device: a CUDA mesh's communicator may be NCCL.
      dt::Tensor l = dt::from_vector(std::vector<double>{loss}, {1}).to(opts.device);
      mesh2d.communicator(0)->all_reduce(l, dt::ReduceOp::kAvg)->wait();
      return l.to(dt::Device()).item<double>();
    };
    std::vector<double> losses;
    int64_t compile_mismatches = 0, compared_compiled = 0;
    double max_rel_diff = 0;
    double tp_ms = 0;
    const auto run_start = std::chrono::steady_clock::now();
    const double tokens_per_step = static_cast<double>(a.batch * (2 * a.half - 1));
    for (int64_t step = start; step < a.steps; ++step) {
      const Batch batch = make_batch(a, step);
      // This dp rank's rows (all of them without --dp).
      const int64_t rows = a.batch / a.dp, len = 2 * a.half - 1;
      const Batch mine{batch.inputs.narrow(0, dp_rank * rows, rows).contiguous(),
                       batch.targets.narrow(0, dp_rank * rows * len, rows * len).contiguous()};
      dt::world_communicator()->barrier()->wait();
      const auto t0 = std::chrono::steady_clock::now();
      double loss;
      std::string comm_str;
      auto run_step = [&] {
        if (!compiled) return train_step(model, opt, mine, &mesh, opts.device);
        return loss_value((*compiled)(step_inputs(mine, &mesh, opts.device))[0]);
      };
      if (step == 1) {  // the first step after the caches are warm
        dt::CommDebugMode comm;
        loss = run_step();
        comm_str = comm.str();
      } else {
        loss = run_step();
      }
      loss = global_loss(loss);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (step > start) tp_ms += ms;
      losses.push_back(loss);
      if (twin != nullptr && step < a.compare_steps) {
        const double eager = global_loss(train_step(*twin, *twin_opt, mine, &mesh, opts.device));
        if (eager != loss) compile_mismatches += 1;
        compared_compiled += 1;
      }
      if (step < a.compare_steps) {
        const double want = train_step(ref, ref_opt, batch, nullptr, opts.device);
        max_rel_diff =
            std::max(max_rel_diff, std::abs(loss - want) / std::max(1.0, std::abs(want)));
      }
      if (rank == 0 && !comm_str.empty()) {
        std::printf("collectives of one training step (forward + backward + AdamW): %s\n",
                    comm_str.c_str());
      }
      if (rank == 0 && (step % a.log_every == 0 || step + 1 == a.steps)) {
        // Progress: step, loss, elapsed wall time, this step's time and the mean rate so far.
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
        std::printf(
            "step %4lld/%lld  loss %.4f  elapsed %.1f s  %.1f ms/step  %.0f tokens/s\n",
            (long long)step, (long long)a.steps, loss, elapsed, ms,
            tokens_per_step * static_cast<double>(step - start + 1) / std::max(elapsed, 1e-9));
        std::fflush(stdout);
      }
      if (a.save_every > 0 && (step + 1) % a.save_every == 0) {
        dt::checkpoint::save_training_state(&model, &opt, nullptr, a.ckpt);
        if (rank == 0)
          std::printf("saved step %lld to '%s'\n", (long long)(step + 1), a.ckpt.c_str());
      }
    }
    const size_t tail = std::min<size_t>(10, losses.size());
    double final_loss = 0;
    for (size_t i = losses.size() - tail; i < losses.size(); ++i) final_loss += losses[i] / tail;
    // Every rank decides alike (the losses are replicated; the worst difference is shared).
    dt::Tensor d = dt::from_vector(std::vector<double>{max_rel_diff}, {1});
    dt::world_communicator()->all_reduce(d, dt::ReduceOp::kMax)->wait();
    max_rel_diff = d.item<double>();
    const bool learned = final_loss < a.threshold;
    const bool agrees = max_rel_diff <= a.tol && compile_mismatches == 0;
    if (rank == 0) {
      std::printf("final loss (mean of the last %zu steps) %.4f (threshold %.3g) -> %s\n", tail,
                  final_loss, a.threshold, learned ? "learned" : "NOT LEARNED");
      std::printf(
          "tensor-parallel vs single-device loss over the first %lld steps: max relative "
          "difference %.3g (tolerance %.3g) -> %s\n",
          (long long)std::max<int64_t>(0, std::min(a.compare_steps, a.steps) - start), max_rel_diff,
          a.tol, agrees ? "OK" : "MISMATCH");
      if (compiled) {
        const dt::compiler::GraphStats& s = compiled->graph().stats();
        std::printf(
            "compiled step: %lld capture(s), %lld replays; graph of %lld nodes, %lld collectives "
            "(%lld deduplicated); losses vs the eager step over %lld steps: %s\n",
            (long long)compiled->captures(), (long long)compiled->replays(),
            (long long)compiled->graph().nodes().size(), (long long)s.collectives,
            (long long)s.deduplicated, (long long)compared_compiled,
            compile_mismatches == 0 ? "equal bit for bit" : "DIFFERENT");
      }
      std::printf("mean step time %.1f ms (%d ranks)\n",
                  tp_ms / std::max<int64_t>(1, a.steps - start - 1), world);
    }
    return learned && agrees ? 0 : 1;
  } catch (const dt::Error& e) {
    std::cerr << "rank " << rank << ": " << e.what() << "\n";
    return 1;
  }
}
