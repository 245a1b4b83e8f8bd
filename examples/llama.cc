// A Hugging Face Llama end to end (issue 43): load a checkpoint directory into a Llama
// parallelized on a dp x tp mesh (tensor parallel over tp, FSDP over dp, as torchtitan does),
// generate, fine-tune with activation checkpointing, generate again, save a Hugging Face
// directory and reload it. Guide: docs/guides/hugging_face_checkpoints.md, "A Llama end to end".
//
//   mpirun -np 4 ./llama                        # the committed tiny checkpoint, dp 2 x tp 2
//   mpirun -np 4 ./llama --model DIR --save OUT # any Llama directory (config.json + weights)
//   mpirun -np 4 ./llama --compile              # fine-tuning from a compiled step
//
// 1. models::LlamaConfig::from_hf_dir reads config.json; models::parallelize_llama shards the
//    model (Megatron plan on tp, fully_shard with one unit per decoder layer on dp);
//    checkpoint::load_hf reads each rank's shards of the weights straight into it.
// 2. A greedy generation of a fixed prompt (models::generate with its KV cache), printed as
//    token ids: the tiny checkpoint has no tokenizer.
// 3. Fine-tuning, --steps AdamW steps of models::causal_lm_loss on a fixed batch of --batch random
//    sequences of --seq-len tokens (each dp rank takes its share of the rows), every decoder
//    layer under activation checkpointing (--no-ac: off); the loss of each step is printed.
//    --compile runs these steps from dtensor::compile(step) (docs/guides/compiling_a_step.md):
//    the first step is captured, the others replay its graph; an eager twin (a second model
//    loaded and parallelized alike) runs the same steps, and every loss and, at the end, every
//    parameter must equal the twin's bit for bit.
// 4. The same sequences' first --prompt-len tokens as prompts: greedy generation must now
//    continue each with the rest of its sequence (memorised).
// 5. checkpoint::save_hf writes the fine-tuned model as a Hugging Face directory (--save DIR;
//    default a temporary one, removed at exit) that transformers' from_pretrained loads; a fresh
//    model parallelized alike loads it back and must give the same logits bit for bit.
//
// Checks against transformers when the model directory holds reference.safetensors (the tiny
// checkpoint does: scripts/make_tiny_llama.py): before fine-tuning, the causal-LM loss on its
// batch equals transformers' loss within float32 rounding, and the greedy tokens of its prompt
// equal transformers' generate(). Exit status 0 when every check holds (the reference ones, the
// loss falling below --threshold, the memorised continuations, the reloaded logits, with
// --compile the compiled steps equal to eager); 1 otherwise.
#include <dtensor/dtensor.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace models = dtensor::models;
namespace ck = dtensor::checkpoint;
namespace fs = std::filesystem;

namespace {

#ifndef DTENSOR_TINY_LLAMA_DIR  // set by examples/CMakeLists.txt to the source tree's copy
#define DTENSOR_TINY_LLAMA_DIR "tests/data/tiny_llama"
#endif

struct Args {
  std::string model = DTENSOR_TINY_LLAMA_DIR;
  std::string save;   // empty: a temporary directory, removed at exit
  int64_t dp = 0;     // 0: the default (see default_dp)
  int64_t batch = 0;  // 0: the smallest multiple of dp that is at least 2
  int64_t seq_len = 16, prompt_len = 4, steps = 30;
  double lr = 1e-2, threshold = 0.1;
  uint64_t seed = 43;
  bool ac = true;        // activation checkpointing of every decoder layer
  bool compile = false;  // fine-tuning steps from dtensor::compile's replay
};

const char* kUsage =
    "usage: llama [--model DIR] [--dp N] [--steps N] [--lr X] [--batch N] [--seq-len N]\n"
    "             [--prompt-len N] [--threshold X] [--seed N] [--no-ac] [--compile]\n"
    "             [--save DIR]\n"
    "  loads the Hugging Face Llama directory DIR (default: the committed tests/data/tiny_llama)\n"
    "  onto a dp x tp mesh of every rank (--dp N: N x ranks / N; default 2 x ranks / 2 on 4 or\n"
    "  more ranks when that divides the heads, else the smallest dp whose tp does), tensor\n"
    "  parallel over tp and FSDP over dp; prints a greedy generation (token ids), fine-tunes\n"
    "  --steps AdamW steps on --batch random sequences of --seq-len tokens with activation\n"
    "  checkpointing per decoder layer (--no-ac: off), checks that greedy generation from their\n"
    "  first --prompt-len tokens now gives the rest and that the loss fell below --threshold,\n"
    "  saves a Hugging Face directory (--save DIR, default a temporary one) and checks that a\n"
    "  fresh model loaded from it gives the same logits. With DIR/reference.safetensors (the tiny\n"
    "  checkpoint's) the loaded model's loss and greedy tokens must equal transformers'.\n"
    "  --compile: the fine-tuning steps run from a compiled step (the first captured, the others\n"
    "  replayed); an eager twin runs the same steps and every loss and the final parameters must\n"
    "  equal its own bit for bit.\n";

// Parses flags; returns 0 to run, 1 after --help, 2 on a bad flag.
int parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--help" || f == "-h") return 1;
    if (f == "--no-ac") {
      a.ac = false;
      continue;
    }
    if (f == "--compile") {
      a.compile = true;
      continue;
    }
    if (i + 1 >= argc) return 2;
    const char* v = argv[++i];
    if (f == "--model")
      a.model = v;
    else if (f == "--save")
      a.save = v;
    else if (f == "--dp")
      a.dp = std::atoll(v);
    else if (f == "--batch")
      a.batch = std::atoll(v);
    else if (f == "--seq-len")
      a.seq_len = std::atoll(v);
    else if (f == "--prompt-len")
      a.prompt_len = std::atoll(v);
    else if (f == "--steps")
      a.steps = std::atoll(v);
    else if (f == "--lr")
      a.lr = std::atof(v);
    else if (f == "--threshold")
      a.threshold = std::atof(v);
    else if (f == "--seed")
      a.seed = std::strtoull(v, nullptr, 10);
    else
      return 2;
  }
  return a.dp >= 0 && a.batch >= 0 && a.steps >= 1 && a.prompt_len >= 1 && a.seq_len > a.prompt_len
             ? 0
             : 2;
}

// The default dp degree: 2 on 4 or more ranks of an even count (so 4 ranks are the 2 x 2 mesh
// of the README), else 1, raised to the next divisor of the world whose tp degree divides the
// attention heads (tensor parallelism cannot split a head): 3 ranks of a 4-head model run dp 3.
int64_t default_dp(int64_t world, int64_t heads) {
  for (int64_t d = world >= 4 && world % 2 == 0 ? 2 : 1; d <= world; ++d) {
    if (world % d == 0 && heads % (world / d) == 0) return d;
  }
  return world;
}

// The ("dp", "tp") mesh, without the dims of size 1 (parallelize_llama applies only the
// parallelisms the mesh names; one rank is a tp mesh of size 1).
dt::DeviceMesh make_mesh(int64_t dp, int64_t tp) {
  if (dp > 1 && tp > 1) return dt::init_device_mesh(dt::kCPU, {dp, tp}, {"dp", "tp"});
  if (dp > 1) return dt::init_device_mesh(dt::kCPU, {dp}, {"dp"});
  return dt::init_device_mesh(dt::kCPU, {tp}, {"tp"});
}

// `x` reduced by `op` over the ranks of `comm`.
double reduce(double x, const dt::CommunicatorPtr& comm, dt::ReduceOp op) {
  dt::Tensor t = dt::from_vector(std::vector<double>{x}, {1});
  comm->all_reduce(t, op)->wait();
  return t.item<double>();
}

// The largest of every rank's `x` (every rank decides its checks alike).
double world_max(double x) {
  return reduce(x, dt::world_communicator(), dt::ReduceOp::kMax);
}

// Runs `make` (file-system work) on rank 0 and raises on every rank when it failed there, so
// that no rank waits for one that stopped.
void on_rank0(const std::string& what, const std::function<void(std::error_code&)>& make) {
  std::error_code ec;
  if (dt::world_rank() == 0) make(ec);
  DT_CHECK(world_max(ec ? 1.0 : 0.0) == 0, "[llama] %s failed on rank 0: %s", what,
           ec ? ec.message() : std::string("see rank 0"));
}

// A scratch directory with the same path on every rank (rank 0's process id in its name),
// created by rank 0.
fs::path scratch_dir() {
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);  // TMPDIR, else /tmp
  DT_CHECK(world_max(ec ? 1.0 : 0.0) == 0, "[llama] no temporary directory on some rank%s%s",
           ec ? ": " : "", ec ? ec.message() : std::string());
  const double pid = world_max(dt::world_rank() == 0 ? static_cast<double>(::getpid()) : 0.0);
  const fs::path dir = tmp / ("dtensor_llama_" + std::to_string(static_cast<int64_t>(pid)));
  on_rank0("creating " + dir.string(), [&](std::error_code& e) { fs::create_directories(dir, e); });
  return dir;
}

// transformers' results for the tiny checkpoint (scripts/make_tiny_llama.py), read by
// checkpoint::load_hf: reference.safetensors is a safetensors file like the weights, so a
// directory where it is linked as model.safetensors loads it into named (local) tensors of the
// shapes the script writes; its grad.* entries are not asked for (strict off).
struct Reference {
  dt::Tensor input_ids, loss, prompt, tokens;
};

Reference read_reference(const std::string& model_dir, const fs::path& scratch) {
  const fs::path dir = scratch / "reference";
  on_rank0("linking the reference file into " + dir.string(), [&](std::error_code& ec) {
    if (fs::create_directories(dir, ec); ec) return;
    const fs::path file = fs::absolute(fs::path(model_dir) / "reference.safetensors", ec);
    if (!ec) fs::create_symlink(file, dir / "model.safetensors", ec);
  });
  const auto i64 = dt::TensorOptions(dt::kInt64);
  Reference r{dt::empty({2, 12}, i64), dt::empty(dt::Shape{}, dt::TensorOptions(dt::kFloat32)),
              dt::empty({1, 5}, i64), dt::empty({1, 13}, i64)};
  const ck::StateDict state = {{"input_ids", nn::local_dtensor(r.input_ids)},
                               {"loss", nn::local_dtensor(r.loss)},
                               {"greedy.prompt", nn::local_dtensor(r.prompt)},
                               {"greedy.tokens", nn::local_dtensor(r.tokens)}};
  ck::load_hf(state, dir.string(), {.strict = false});
  return r;
}

// One fine-tuning step on this rank's rows `in[0]`: returns the loss (what --compile captures).
dt::DTensorList train_step(models::Llama& model, dt::optim::AdamW& opt, const dt::DTensorList& in) {
  opt.zero_grad();
  const dt::DTensor loss = models::causal_lm_loss(model(in[0]), in[0]);
  loss.backward();
  opt.step();
  return {loss.detach()};
}

// The largest absolute difference between the parameters of two models parallelized alike
// (this rank's shards).
double max_param_diff(const models::Llama& a, const models::Llama& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  DT_CHECK(pa.size() == pb.size(), "[llama] the twin has %d parameters, the model %d", pb.size(),
           pa.size());
  double diff = 0;
  for (size_t k = 0; k < pa.size(); ++k) {
    const dt::Tensor x = pa[k].second.to_local(), y = pb[k].second.to_local();
    if (x.numel() == 0) continue;
    diff = std::max<double>(diff, dt::max(dt::abs(dt::sub(x, y))).item<float>());
  }
  return diff;
}

std::string ids_str(const dt::Tensor& row) {
  std::string s = "[";
  for (int64_t v : row.contiguous().to_vector<int64_t>()) {
    s += (s.size() > 1 ? " " : "") + std::to_string(v);
  }
  return s + "]";
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
  fs::path scratch;
  // Rank 0 removes the scratch directory (the default --save and the reference link) at exit.
  auto cleanup = [&] {
    if (scratch.empty()) return;
    dt::world_communicator()->barrier()->wait();
    std::error_code ignored;  // a temporary directory left behind is no failure of the example
    if (rank == 0) fs::remove_all(scratch, ignored);
  };
  try {
    // 1. The model: config.json, the mesh, the parallelization, then the weights into the shards.
    const models::LlamaConfig cfg = models::LlamaConfig::from_hf_dir(a.model);
    if (a.dp == 0) a.dp = default_dp(world, cfg.num_attention_heads);
    if (a.batch == 0) a.batch = a.dp * ((2 + a.dp - 1) / a.dp);
    DT_CHECK(world % a.dp == 0, "[llama] --dp %d does not divide %d ranks", a.dp, world);
    DT_CHECK(a.batch % a.dp == 0, "[llama] --dp %d does not divide --batch %d", a.dp, a.batch);
    DT_CHECK(a.seq_len <= cfg.max_position_embeddings,
             "[llama] --seq-len %d exceeds max_position_embeddings %d", a.seq_len,
             cfg.max_position_embeddings);
    const int64_t tp = world / a.dp;
    const dt::DeviceMesh mesh = make_mesh(a.dp, tp);
    // Each dp rank trains on its rows of the batch (all of them without dp).
    const int64_t dp_rank = a.dp > 1 ? mesh.get_local_rank(0) : 0;
    scratch = scratch_dir();
    const std::string save_dir = a.save.empty() ? (scratch / "llama_finetuned").string() : a.save;

    auto model = std::make_unique<models::Llama>(cfg);
    const std::shared_ptr<dt::DataParallel> fsdp = models::parallelize_llama(*model, mesh);
    ck::load_hf(*model, a.model);  // strict: every parameter, no stray entry
    std::vector<std::string> wrapped;
    if (a.ac) wrapped = nn::apply_activation_checkpointing(*model, "model.layers");

    int64_t n_params = 0;
    for (const auto& [name, p] : model->named_parameters()) n_params += p.numel();
    if (rank == 0) {
      std::printf(
          "llama: %d rank(s), mesh dp %lld x tp %lld, model '%s': vocab %lld, hidden %lld, "
          "%lld layers, %lld heads / %lld kv heads, head_dim %lld, intermediate %lld, %lld "
          "parameters\n",
          world, (long long)a.dp, (long long)tp, a.model.c_str(), (long long)cfg.vocab_size,
          (long long)cfg.hidden_size, (long long)cfg.num_hidden_layers,
          (long long)cfg.num_attention_heads, (long long)cfg.num_key_value_heads,
          (long long)cfg.head_dim, (long long)cfg.intermediate_size, (long long)n_params);
      std::printf("%s\n", dt::config_str().c_str());  // version, GEMM library and kernel, threads
      std::string how;
      if (tp > 1) how += "tensor parallel over tp (Megatron plan), ";
      if (fsdp != nullptr) how += "fully_shard over dp (one unit per decoder layer), ";
      if (how.empty()) how = "one rank, ";
      std::printf(
          "%sactivation checkpointing: %s\n", how.c_str(),
          wrapped.empty() ? "off" : (std::to_string(wrapped.size()) + " decoder layers").c_str());
    }
    bool ok = true;

    // 2. Before fine-tuning: transformers' results, when the directory has them, and a greedy
    //    generation. Every rank generates the same prompts (FSDP's gathers need every dp rank in
    //    each forward) and gets the same tokens.
    models::GenerateOptions greedy;
    const bool has_reference = fs::exists(fs::path(a.model) / "reference.safetensors");
    if (has_reference) {
      const Reference ref = read_reference(a.model, scratch);
      double loss;
      {
        // The whole batch on every dp rank (any dp degree): the same loss everywhere.
        dt::autograd::NoGradGuard no_grad;
        const dt::DTensor ids = nn::local_dtensor(ref.input_ids);
        loss = models::causal_lm_loss((*model)(ids), ids).full_tensor().item<float>();
      }
      const double want = ref.loss.item<float>();
      const bool loss_ok = std::abs(loss - want) <= 1e-5 * std::max(1.0, std::abs(want));
      greedy.max_new_tokens = ref.tokens.size(1) - ref.prompt.size(1);
      const dt::Tensor got = models::generate(*model, ref.prompt, greedy);
      const bool tokens_ok = dt::equal(got, ref.tokens);
      ok = ok && loss_ok && tokens_ok;
      if (rank == 0) {
        std::printf(
            "loss on transformers' reference batch %.6f, transformers %.6f -> %s\n"
            "greedy generation (token ids: the tiny checkpoint has no tokenizer), prompt %s:\n"
            "  %s -> %s transformers' generate()\n",
            loss, want, loss_ok ? "OK" : "MISMATCH", ids_str(ref.prompt.select(0, 0)).c_str(),
            ids_str(got.select(0, 0).narrow(0, ref.prompt.size(1), greedy.max_new_tokens)).c_str(),
            tokens_ok ? "equal to" : "DIFFERENT from");
      }
    } else if (rank == 0) {
      std::printf("no reference.safetensors in '%s': the checks against transformers are skipped\n",
                  a.model.c_str());
    }

    // 3. Fine-tuning: --batch random sequences (ids from 3 on, past the tiny checkpoint's bos 1 /
    //    eos 2), the same on every rank; each dp rank trains on its rows and FSDP averages the
    //    gradients over dp, so the step is the global batch's.
    dt::Generator gen(a.seed);
    const dt::Tensor seqs =
        dt::randint(3, cfg.vocab_size, {a.batch, a.seq_len}, dt::TensorOptions(dt::kInt64), &gen);
    const int64_t rows = a.batch / a.dp;
    const dt::DTensor mine = nn::local_dtensor(seqs.narrow(0, dp_rank * rows, rows).contiguous());
    const dt::Tensor prompts = seqs.narrow(1, 0, a.prompt_len).contiguous();
    greedy.max_new_tokens = a.seq_len - a.prompt_len;
    const dt::Tensor before = models::generate(*model, prompts, greedy);
    if (rank == 0) {
      std::printf("fine-tuning on %lld sequences of %lld tokens, e.g. %s\n", (long long)a.batch,
                  (long long)a.seq_len, ids_str(seqs.select(0, 0)).c_str());
      std::printf(
          "  before, greedy from its first %lld: %s\n", (long long)a.prompt_len,
          ids_str(before.select(0, 0).narrow(0, a.prompt_len, greedy.max_new_tokens)).c_str());
    }
    dt::optim::AdamW opt(model->parameters(), dt::optim::AdamWOptions(a.lr));
    // --compile: the step captured on its first call and replayed after, and an eager twin of
    // the model (loaded, parallelized and checkpointed alike) that runs the same steps.
    std::unique_ptr<models::Llama> twin;
    std::unique_ptr<dt::optim::AdamW> twin_opt;
    std::optional<dt::CompiledStep> compiled;
    if (a.compile) {
      twin = std::make_unique<models::Llama>(cfg);
      models::parallelize_llama(*twin, mesh);
      ck::load_hf(*twin, a.model);
      if (a.ac) nn::apply_activation_checkpointing(*twin, "model.layers");
      twin_opt =
          std::make_unique<dt::optim::AdamW>(twin->parameters(), dt::optim::AdamWOptions(a.lr));
      dt::CompileOptions options;
      options.module = model.get();
      compiled.emplace(dt::compile(
          [&](const dt::DTensorList& in) { return train_step(*model, opt, in); }, options));
    }
    int64_t compile_mismatches = 0;
    std::vector<double> losses;
    for (int64_t step = 0; step < a.steps; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      const dt::DTensor loss =
          compiled ? (*compiled)({mine})[0] : train_step(*model, opt, {mine})[0];
      const auto t1 = std::chrono::steady_clock::now();
      // The dp ranks' rows have equal token counts: the mean of their losses is the batch's.
      const double local = loss.full_tensor().item<float>();
      if (twin != nullptr) {
        const double eager = train_step(*twin, *twin_opt, {mine})[0].full_tensor().item<float>();
        compile_mismatches += eager == local ? 0 : 1;
      }
      losses.push_back(a.dp == 1 ? local : reduce(local, mesh.communicator(0), dt::ReduceOp::kAvg));
      if (rank == 0) {
        std::printf("step %3lld/%lld  loss %.4f  %.1f ms%s\n", (long long)(step + 1),
                    (long long)a.steps, losses.back(),
                    std::chrono::duration<double, std::milli>(t1 - t0).count(),
                    !compiled   ? ""
                    : step == 0 ? " (captured)"
                                : " (replayed)");
        std::fflush(stdout);
      }
    }
    const bool learned = losses.back() < a.threshold && losses.back() < losses.front();
    // Every rank decides alike: the mismatches and the parameters' difference of any rank.
    bool compiled_equal = true;
    if (compiled) {
      const double mismatches = world_max(static_cast<double>(compile_mismatches));
      const double param_diff = world_max(max_param_diff(*model, *twin));
      compiled_equal = mismatches == 0 && param_diff == 0;
      if (rank == 0) {
        const dt::compiler::GraphStats& s = compiled->graph().stats();
        std::printf(
            "compiled step: %lld capture(s), %lld replays; graph of %lld nodes, %lld collectives "
            "(%lld deduplicated); vs the eager twin: %lld of %lld losses differ, parameters max "
            "abs difference %g -> %s\n",
            (long long)compiled->captures(), (long long)compiled->replays(),
            (long long)compiled->graph().nodes().size(), (long long)s.collectives,
            (long long)s.deduplicated, (long long)mismatches, (long long)a.steps, param_diff,
            compiled_equal ? "equal bit for bit" : "DIFFERENT");
      }
      twin_opt.reset();  // the twin's memory back before generation and the reload
      twin.reset();
    }

    // 4. The memorised continuations.
    const dt::Tensor after = models::generate(*model, prompts, greedy);
    const bool memorised = dt::equal(after, seqs);
    if (rank == 0) {
      std::printf("final loss %.4f (first %.4f, threshold %.3g) -> %s\n", losses.back(),
                  losses.front(), a.threshold, learned ? "learned" : "NOT LEARNED");
      std::printf(
          "  after, greedy from its first %lld: %s\n", (long long)a.prompt_len,
          ids_str(after.select(0, 0).narrow(0, a.prompt_len, greedy.max_new_tokens)).c_str());
      std::printf("greedy continuations of the %lld prompts %s the memorised sequences -> %s\n",
                  (long long)a.batch, memorised ? "equal" : "DIFFER FROM",
                  memorised ? "OK" : "MISMATCH");
    }

    // 5. Save as a Hugging Face directory, load it into a fresh model parallelized alike.
    ck::HfSaveOptions out;
    out.config_json = ck::read_hf_config(a.model);
    ck::save_hf(*model, save_dir, out);
    auto fresh = std::make_unique<models::Llama>(cfg);
    models::parallelize_llama(*fresh, mesh);
    ck::load_hf(*fresh, save_dir);
    double diff;
    {
      dt::autograd::NoGradGuard no_grad;
      const dt::Tensor x = (*model)(mine).full_tensor(), y = (*fresh)(mine).full_tensor();
      diff = world_max(dt::max(dt::abs(dt::sub(x, y))).item<float>());
    }
    const bool reloaded = diff == 0;
    if (rank == 0) {
      std::printf(
          "saved a Hugging Face directory to '%s'%s; reloaded into a fresh model: logits max abs "
          "difference %g -> %s\n",
          save_dir.c_str(), a.save.empty() ? " (temporary: --save DIR keeps one)" : "", diff,
          reloaded ? "OK (equal)" : "MISMATCH");
    }
    cleanup();
    return ok && learned && compiled_equal && memorised && reloaded ? 0 : 1;
  } catch (const dt::Error& e) {
    std::cerr << "rank " << rank << ": " << e.what() << "\n";
    // Errors are raised on every rank alike: no barrier (a rank may be gone already).
    std::error_code ignored;
    if (rank == 0 && !scratch.empty()) fs::remove_all(scratch, ignored);
    return 1;
  }
}
