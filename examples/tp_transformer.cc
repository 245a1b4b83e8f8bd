// Tensor parallelism end to end: a small decoder-only transformer run on one device and
// tensor-parallel over every rank, with the same weights, compared element by element.
//
//   mpirun -np 4 ./tp_transformer --layers 2 --dim 256 --heads 8 --seq 64 --batch 4
//
// Every rank first runs the full model on its own (the single-device reference), then the
// model parallelized with the Megatron plan below (colwise q/k/v and MLP-in, rowwise o and
// MLP-out, vocab-sharded embedding, colwise lm head; --sp adds sequence parallelism). Rank 0
// prints the plan, the parameter shard shapes of every rank, the collectives of one forward,
// the forward times and the largest |difference|; the exit code is 1 when that difference
// exceeds --tol. --cuda runs on the GPU when dtensor is built with CUDA and one is present.
#include <dtensor/dtensor.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace dt = dtensor;
namespace nn = dtensor::nn;

namespace {

struct Args {
  int64_t layers = 2, dim = 128, heads = 8, seq = 32, batch = 4, vocab = 1000, hidden = 0;
  int iters = 5;
  double tol = 1e-3;
  bool sp = false;
  bool cuda = false;
};

void usage(std::ostream& os = std::cerr) {
  os << "usage: tp_transformer [--layers N] [--dim N] [--heads N] [--seq N] [--batch N]\n"
        "                      [--vocab N] [--hidden N] [--iters N] [--tol X] [--sp]"
        " [--cuda]\n"
        "  runs a transformer tensor-parallel over every rank (--sp: with sequence\n"
        "  parallelism), checks its output against one device within --tol and prints the\n"
        "  median forward time of --iters runs.\n";
}

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto int_flag = [&](int64_t& v) {
      const char* s = next();
      if (s == nullptr) return false;
      v = std::atoll(s);
      return true;
    };
    bool ok = true;
    if (f == "--layers")
      ok = int_flag(a.layers);
    else if (f == "--dim")
      ok = int_flag(a.dim);
    else if (f == "--heads")
      ok = int_flag(a.heads);
    else if (f == "--seq")
      ok = int_flag(a.seq);
    else if (f == "--batch")
      ok = int_flag(a.batch);
    else if (f == "--vocab")
      ok = int_flag(a.vocab);
    else if (f == "--hidden")
      ok = int_flag(a.hidden);
    else if (f == "--iters") {
      int64_t v = 0;
      ok = int_flag(v);
      a.iters = static_cast<int>(std::max<int64_t>(v, 1));
    } else if (f == "--tol") {
      const char* s = next();
      ok = s != nullptr;
      if (ok) a.tol = std::atof(s);
    } else if (f == "--sp")
      a.sp = true;
    else if (f == "--cuda")
      a.cuda = true;
    else
      ok = false;
    if (!ok) return false;
  }
  return true;
}

// Median wall time of `iters` runs of fn (after one warm-up), in milliseconds. Ranks are
// synchronised with a barrier before each run so the slowest rank sets the time.
template <typename F>
double time_ms(int iters, F fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    dt::world_communicator()->barrier()->wait();
    auto t0 = std::chrono::steady_clock::now();
    fn();
    dt::world_communicator()->barrier()->wait();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Every rank's values of `v` (one int64 record per rank), on every rank.
std::vector<int64_t> all_gather_ints(const std::vector<int64_t>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  dt::Tensor in = dt::from_vector(v, {n});
  dt::Tensor out = dt::empty({dt::world_size() * n}, dt::TensorOptions(dt::kInt64));
  if (n > 0) dt::world_communicator()->all_gather(out, in)->wait();
  return out.to_vector<int64_t>();
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  const int rank = dt::world_rank();
  const int world = dt::world_size();
  Args a;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      if (rank == 0) usage(std::cout);
      return 0;
    }
  }
  if (!parse(argc, argv, a)) {
    if (rank == 0) usage();
    return 2;
  }
  try {
    dt::DeviceType dev_type = dt::kCPU;
    if (a.cuda) {
      if (dt::cuda_available()) {  // false without CUDA compiled in
        dev_type = dt::kCUDA;
      } else if (rank == 0) {
        std::cout << "--cuda: no CUDA device or CUDA not compiled in; running on the CPU\n";
      }
    }
    nn::ModuleOptions opts;
    if (dev_type == dt::kCUDA) {
      opts.device = dt::Device(dt::kCUDA, dt::local_cuda_device());
    }
    nn::TransformerConfig cfg;
    cfg.vocab_size = a.vocab;
    cfg.dim = a.dim;
    cfg.n_layers = a.layers;
    cfg.n_heads = a.heads;
    cfg.hidden_dim = a.hidden;
    cfg.norm = nn::NormKind::kRMSNorm;
    cfg.mlp = nn::MLPKind::kSwiGLU;

    // Same seed -> the same full weights on every rank, for both models.
    dt::manual_seed(1234);
    nn::Transformer ref(cfg, opts);
    dt::manual_seed(1234);
    nn::Transformer model(cfg, opts);

    dt::DeviceMesh mesh = dt::init_device_mesh(dev_type, {world}, {"tp"});
    const dt::ParallelizePlan plan = dt::transformer_tp_plan({.sequence_parallel = a.sp});
    dt::parallelize_module(model, mesh, plan);

    dt::Generator gen(42);
    dt::Tensor tokens =
        dt::randint(0, a.vocab, {a.batch, a.seq}, dt::TensorOptions(dt::kInt64), &gen)
            .to(opts.device);

    if (rank == 0) {
      std::printf(
          "tp_transformer: %d rank(s), %s, layers=%lld dim=%lld heads=%lld seq=%lld "
          "batch=%lld vocab=%lld%s\n",
          world, dt::Device(dev_type).str().c_str(), (long long)a.layers, (long long)a.dim,
          (long long)a.heads, (long long)a.seq, (long long)a.batch, (long long)a.vocab,
          a.sp ? " (sequence parallel)" : "");
      std::printf("\nplan (mesh %s):\n", mesh.str().c_str());
      for (const auto& e : plan) std::printf("  %-26s %s\n", e.fqn.c_str(), e.style->str().c_str());
      std::printf("\nparameter shards (local shape per rank):\n");
    }
    for (const auto& [name, p] : model.named_parameters()) {
      // Shapes have at most 2 dims here; pad to 2 so every rank sends one fixed-size record.
      std::vector<int64_t> rec(2, -1);
      const auto& s = p.to_local().shape();
      for (size_t i = 0; i < s.size() && i < 2; ++i) rec[i] = s[i];
      const auto all = all_gather_ints(rec);
      if (rank != 0) continue;
      std::string line = "  " + name + " " + dt::shape_str(p.shape()) + " " +
                         (nn::is_local(p) && world > 1 ? std::string("local")
                                                       : dt::placements_str(p.placements())) +
                         ":";
      for (int r = 0; r < world; ++r) {
        dt::Shape rs;
        for (int i = 0; i < 2 && all[r * 2 + i] >= 0; ++i) rs.push_back(all[r * 2 + i]);
        line += " " + dt::shape_str(rs);
      }
      std::printf("%s\n", line.c_str());
    }

    dt::Tensor y_ref = ref(nn::local_dtensor(tokens)).to_local();
    dt::Tensor y_tp;
    std::string comm_str;
    {
      dt::CommDebugMode comm;
      y_tp = model(nn::local_dtensor(tokens)).to_local();
      comm_str = comm.str();
    }
    const double t_ref = time_ms(a.iters, [&] { ref(nn::local_dtensor(tokens)); });
    const double t_tp = time_ms(a.iters, [&] { model(nn::local_dtensor(tokens)); });

    double diff = 0;
    {
      const auto x = y_ref.to(dt::kCPU).to(dt::kFloat64).to_vector<double>();
      const auto y = y_tp.to(dt::kCPU).to(dt::kFloat64).to_vector<double>();
      if (x.size() != y.size()) {
        diff = 1e30;
      } else {
        for (size_t i = 0; i < x.size(); ++i) diff = std::max(diff, std::abs(x[i] - y[i]));
      }
    }
    dt::Tensor d = dt::from_vector(std::vector<double>{diff}, {1});
    dt::world_communicator()->all_reduce(d, dt::ReduceOp::kMax)->wait();
    diff = d.item<double>();
    const bool ok = diff <= a.tol;
    if (rank == 0) {
      std::printf("\ncollectives in one tensor-parallel forward: %s\n", comm_str.c_str());
      std::printf(
          "forward time (median of %d): single-device %.3f ms, tensor-parallel %.3f ms "
          "(speed-up x%.2f)\n",
          a.iters, t_ref, t_tp, t_tp > 0 ? t_ref / t_tp : 0.0);
      std::printf(
          "max |tensor-parallel - single-device| over logits %s: %.3g (tolerance %.3g) "
          "-> %s\n",
          dt::shape_str(y_tp.shape()).c_str(), diff, a.tol, ok ? "OK" : "MISMATCH");
    }
    return ok ? 0 : 1;
  } catch (const dt::Error& e) {
    std::cerr << "rank " << rank << ": " << e.what() << "\n";
    return 1;
  }
}
