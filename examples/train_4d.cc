// Training a Llama on up to four parallel dims at once (issue 45 item 5): pipeline (pp), FSDP
// (dp), context parallel (cp) and tensor parallel (tp), as torchtitan composes them.
//
//   mpirun -np 8 --oversubscribe ./train_4d --pp 2 --dp 2 --tp 2   # 3-D: pp x dp x tp
//   mpirun -np 8 --oversubscribe ./train_4d --dp 2 --cp 2 --tp 2   # 3-D: dp x cp x tp
//   mpirun -np 8 --oversubscribe ./train_4d --pp 2 --cp 2 --tp 2   # 3-D: pp x cp x tp
//   mpirun -np 16 --oversubscribe ./train_4d --pp 2 --dp 2 --cp 2 --tp 2 --steps 10  # 4-D
//   mpirun -np 4 ./train_4d --pp 2 --tp 2 --steps 20
//
// The ranks form a mesh with dims pp, dp, cp, tp (those of degree > 1; the product is the world
// size). With --pp > 1 the model is cut into stages at decoder layers by models::pipeline_llama
// and trained through a 1F1B schedule (--microbatches per step); otherwise parallelize_llama
// applies it all to the one model. Either way: tp (Megatron plan), cp (ring attention over the
// sequence in head-tail order) and FSDP over dp x cp.
//
// A small random Llama (float64, so that the comparison is exact to rounding) learns to count:
// each sequence starts at a random token and adds 1 (mod --vocab) at every position. Every rank
// also trains the same model on one device, on the same batches, and the loss of every step must
// agree within --tol (the global batch's loss: the mean of the dp ranks' losses). Rank 0 prints the
// mesh, the loss every
// --log-every steps and the final losses. Exit status 0 when every step agreed and the loss fell
// below --threshold of its first value; 1 otherwise.
#include <dtensor/dtensor.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace models = dtensor::models;
namespace pp = dtensor::pipelining;

namespace {

struct Args {
  int64_t pp = 1, dp = 1, cp = 1, tp = 1;
  int64_t steps = 40, layers = 4, hidden = 32, heads = 4, kv_heads = 2, vocab = 32, seq = 16;
  int64_t batch = 8, microbatches = 2, log_every = 10;
  double lr = 3e-2, tol = 1e-9, threshold = 0.5;
  bool help = false;  // --help: print the usage, exit 0
  bool bad = false;   // an unknown option or a missing value: the usage on stderr, exit 2
};

void usage(std::ostream& out) {
  out << "usage: train_4d [--pp N] [--dp N] [--cp N] [--tp N] [--steps N] [--layers N]\n"
         "                [--hidden N] [--heads N] [--kv-heads N] [--vocab N] [--seq N]\n"
         "                [--batch N] [--microbatches N] [--lr X] [--tol X]\n"
         "                [--threshold X] [--log-every N]\n"
         "The product pp * dp * cp * tp must equal the number of ranks.\n";
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      a.help = true;
      return a;
    }
    if (i + 1 >= argc) {
      std::cerr << "train_4d: " << k << " needs a value\n";
      a.bad = true;
      return a;
    }
    const std::string v = argv[++i];
    auto integer = [&]() { return std::stoll(v); };
    if (k == "--pp")
      a.pp = integer();
    else if (k == "--dp")
      a.dp = integer();
    else if (k == "--cp")
      a.cp = integer();
    else if (k == "--tp")
      a.tp = integer();
    else if (k == "--steps")
      a.steps = integer();
    else if (k == "--layers")
      a.layers = integer();
    else if (k == "--hidden")
      a.hidden = integer();
    else if (k == "--heads")
      a.heads = integer();
    else if (k == "--kv-heads")
      a.kv_heads = integer();
    else if (k == "--vocab")
      a.vocab = integer();
    else if (k == "--seq")
      a.seq = integer();
    else if (k == "--batch")
      a.batch = integer();
    else if (k == "--microbatches")
      a.microbatches = integer();
    else if (k == "--log-every")
      a.log_every = integer();
    else if (k == "--lr")
      a.lr = std::stod(v);
    else if (k == "--tol")
      a.tol = std::stod(v);
    else if (k == "--threshold")
      a.threshold = std::stod(v);
    else {
      std::cerr << "train_4d: unknown option " << k << "\n";
      a.bad = true;
      return a;
    }
  }
  return a;
}

// Counting sequences: a random first token, then each token the previous one plus 1 (mod
// vocab), [batch, seq] int64. Every token after the first is predictable from the one before.
dt::Tensor counting_batch(const Args& a, dt::Generator& g) {
  const dt::Tensor start = dt::randint(0, a.vocab, {a.batch}, dt::TensorOptions(dt::kInt64), &g);
  const std::vector<int64_t> v = start.to_vector<int64_t>();
  std::vector<int64_t> out;
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t t = 0; t < a.seq; ++t) out.push_back((v[static_cast<size_t>(b)] + t) % a.vocab);
  }
  const int64_t shape[] = {a.batch, a.seq};
  return dt::from_vector(out, shape);
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  const Args a = parse(argc, argv);
  if (a.help || a.bad) {
    if (dt::world_rank() == 0) usage(a.bad ? std::cerr : std::cout);
    return a.bad ? 2 : 0;
  }
  const bool root = dt::world_rank() == 0;
  int status = 0;
  try {
    DT_CHECK(a.pp * a.dp * a.cp * a.tp == dt::world_size(),
             "[train_4d] pp %d x dp %d x cp %d x tp %d needs %d ranks, the world has %d", a.pp,
             a.dp, a.cp, a.tp, a.pp * a.dp * a.cp * a.tp, dt::world_size());
    std::vector<int64_t> shape;
    std::vector<std::string> names;
    for (const auto& [n, d] :
         {std::pair<const char*, int64_t>{"pp", a.pp}, {"dp", a.dp}, {"cp", a.cp}, {"tp", a.tp}}) {
      if (d > 1) {
        shape.push_back(d);
        names.emplace_back(n);
      }
    }
    if (shape.empty()) {
      shape.push_back(1);
      names.emplace_back("dp");
    }
    const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, shape, names);
    if (root) std::cout << "mesh " << mesh.str() << "\n";

    models::LlamaConfig cfg;
    cfg.vocab_size = a.vocab;
    cfg.hidden_size = a.hidden;
    cfg.intermediate_size = 2 * a.hidden;
    cfg.num_hidden_layers = a.layers;
    cfg.num_attention_heads = a.heads;
    cfg.num_key_value_heads = a.kv_heads;
    cfg.head_dim = a.hidden / a.heads;
    cfg.max_position_embeddings = a.seq;
    const nn::ModuleOptions opts{.dtype = dt::kFloat64};
    dt::manual_seed(1);
    models::Llama single(cfg, opts);
    dt::manual_seed(1);
    auto model = std::make_shared<models::Llama>(cfg, opts);

    // The parallel model: a pipeline, or one module parallelized in place.
    models::LlamaPipeline pipe;
    std::unique_ptr<pp::PipelineSchedule> schedule;
    std::vector<dt::DTensor> params;
    if (a.pp > 1) {
      pipe = models::pipeline_llama(model, mesh);
      // The model's loss (under cp: this rank's chunks against the whole rows' labels).
      schedule = pp::make_schedule("1F1B", pipe.stages, a.microbatches,
                                   [&](const dt::DTensor& logits, const dt::DTensor& labels) {
                                     return models::causal_lm_loss(*model, logits, labels);
                                   });
      params = pipe.parameters();
    } else {
      models::parallelize_llama(*model, mesh);
      params = model->parameters();
    }
    dt::optim::AdamW opt_single(single.parameters(), dt::optim::AdamWOptions(a.lr));
    dt::optim::AdamW opt(params, dt::optim::AdamWOptions(a.lr));

    // Each dp rank trains on its rows of the global batch.
    const int64_t rows = a.batch / a.dp;
    const int64_t row0 = a.dp > 1 ? mesh.get_local_rank("dp") * rows : 0;
    dt::Generator g(7);
    double first_loss = 0, last_loss = 0, worst = 0;
    for (int64_t step = 0; step < a.steps; ++step) {
      const dt::Tensor batch = counting_batch(a, g);
      const dt::Tensor mine = batch.narrow(0, row0, rows).contiguous();
      const dt::DTensor ref =
          models::causal_lm_loss(single(nn::local_dtensor(batch)), nn::local_dtensor(batch));
      ref.backward();
      double loss = 0;
      if (schedule) {
        loss = schedule->step(nn::local_dtensor(mine), nn::local_dtensor(mine));
      } else {
        const dt::DTensor l = models::causal_lm_loss(*model, (*model)(nn::local_dtensor(mine)),
                                                     nn::local_dtensor(mine));
        l.backward();
        loss = is_local(l) ? l.to_local().item<double>() : l.full_tensor().item<double>();
      }
      // The global batch's loss: the mean of the dp ranks' (equal rows, equal token counts).
      if (a.dp > 1) {
        const dt::Tensor mine_loss =
            dt::full({1}, loss / static_cast<double>(a.dp), dt::TensorOptions(dt::kFloat64));
        loss = dt::DTensor::from_local(mine_loss, mesh["dp"], {dt::Partial()})
                   .full_tensor()
                   .item<double>();
      }
      opt_single.step();
      opt.step();
      opt_single.zero_grad();
      opt.zero_grad();
      const double want = ref.to_local().item<double>();
      worst = std::max(worst, std::abs(loss - want));
      if (step == 0) first_loss = loss;
      last_loss = loss;
      if (root && (step % a.log_every == 0 || step + 1 == a.steps)) {
        std::printf("step %4lld  loss %.6f  single device %.6f\n", static_cast<long long>(step),
                    loss, want);
      }
    }
    const bool agree = worst <= a.tol;
    const bool learned = last_loss < a.threshold * first_loss;
    if (root) {
      std::printf("max |loss - single device| %.3g (tol %.3g): %s\n", worst, a.tol,
                  agree ? "ok" : "FAILED");
      std::printf("loss %.4f -> %.4f (must fall below %.2f of the first): %s\n", first_loss,
                  last_loss, a.threshold, learned ? "ok" : "FAILED");
    }
    status = agree && learned ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "rank " << dt::world_rank() << ": " << e.what() << "\n";
    status = 1;
  }
  return status;
}
