// Tensor-parallel transformer block forward: DTensor (nn + parallelize_module, Megatron plan)
// vs the single-device block vs a hand-written MPI version of the same math (local GEMMs on
// the same weight shards through dtensor/ops/, one MPI_Allreduce after attention and one after the
// MLP, no DTensor). Run at each rank count:
//
//   mpirun -np N bench_tp [--dim 256] [--heads 8] [--seq 128] [--batch 4] [--hidden 0]
//                         [--iters 30] [--warmup 2] [--json FILE] [--profile VARIANT]
//                         [--no_grad 1]
//
// The block's parameters require grad, so by default its forward records the autograd graph
// (keeping the activations backward needs, as a training step does); --no_grad 1 times it under
// NoGradGuard instead. A fifth variant always times the DTensor block under NoGradGuard
// ("DTensor no-grad"), which separates the recording's cost from the rest of the DTensor layer
// (the hand-written block records nothing).
// --profile dtensor|hand|hand_comm runs that variant alone `iters` times without timing (for
// perf / callgrind: `mpirun -np 2 valgrind --tool=callgrind bench_tp --profile dtensor`).
// Times: median over iterations of the max over ranks (barrier before each; the variants are
// timed interleaved, one run of each per iteration in a shuffled order); the
// single-device block runs on rank 0 alone while the other ranks wait. The hand-written output
// is checked against the DTensor block's output (max |difference| reported).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace bench = dtensor::bench;

namespace {

// The hand-written tensor-parallel block on this rank's weight shards.
struct HandBlock {
  dt::Tensor attn_norm, wq, wk, wv, wo, mlp_norm, w1, w2, w3;  // local shards
  int64_t head_dim = 0;
  std::optional<double> eps;
  dt::Tensor mask;  // [S, S] causal mask (0 / -inf)
  // When set, the all-reduces go through dtensor's Communicator (the backend DTensor uses)
  // instead of MPI_Allreduce: separates the backend's cost from the DTensor layer's.
  dt::CommunicatorPtr comm;

  void all_reduce(dt::Tensor& t) const {
    if (dt::world_size() == 1) return;
    if (comm) {
      comm->all_reduce(t, dt::ReduceOp::kSum)->wait();
      return;
    }
    MPI_Allreduce(MPI_IN_PLACE, t.data<float>(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }

  dt::Tensor attention(const dt::Tensor& h) const {
    const dt::Tensor q = dt::linear(h, wq), k = dt::linear(h, wk), v = dt::linear(h, wv);
    const int64_t B = q.size(0), S = q.size(1), W = q.size(2), H = W / head_dim;
    const dt::Shape split{B, S, H, head_dim};
    auto heads = [&](const dt::Tensor& t) { return t.reshape(split).transpose(1, 2); };
    dt::Tensor scores = dt::matmul(heads(q), heads(k).transpose(2, 3));
    scores = dt::mul(scores, dt::Scalar(1.0 / std::sqrt(double(head_dim))));
    scores = dt::add(scores, mask);
    const dt::Tensor o = dt::matmul(dt::softmax(scores, -1), heads(v));
    dt::Tensor out = dt::linear(o.transpose(1, 2).reshape({B, S, W}), wo).contiguous();
    all_reduce(out);  // rowwise wo: partial sums -> full
    return out;
  }

  dt::Tensor forward(const dt::Tensor& x) const {
    const int64_t D = x.size(2);
    const dt::Tensor h = dt::add(x, attention(dt::rms_norm(x, {D}, attn_norm, eps)));
    const dt::Tensor g = dt::rms_norm(h, {D}, mlp_norm, eps);
    dt::Tensor m =
        dt::linear(dt::mul(dt::silu(dt::linear(g, w1)), dt::linear(g, w3)), w2).contiguous();
    all_reduce(m);  // rowwise w2
    return dt::add(h, m);
  }
};

double max_abs_diff(const dt::Tensor& a, const dt::Tensor& b) {
  const auto x = a.to(dt::kFloat64).to_vector<double>();
  const auto y = b.to(dt::kFloat64).to_vector<double>();
  if (x.size() != y.size()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  bench::Flags flags(argc, argv);
  const int world = dt::world_size();
  nn::TransformerConfig cfg;
  cfg.dim = flags.i64("dim", 256);
  cfg.n_heads = flags.i64("heads", 8);
  cfg.hidden_dim = flags.i64("hidden", 0);
  cfg.norm = nn::NormKind::kRMSNorm;
  cfg.mlp = nn::MLPKind::kSwiGLU;
  cfg.causal = true;
  const int64_t seq = flags.i64("seq", 128), batch = flags.i64("batch", 4);
  const int64_t iters = flags.i64("iters", 30), warmup = flags.i64("warmup", 2);
  bench::JsonLines json("bench_tp", flags.str("json", ""));
  try {
    dt::manual_seed(1234);
    nn::TransformerBlock ref(cfg);
    dt::manual_seed(1234);
    nn::TransformerBlock block(cfg);
    dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {world}, {"tp"});
    dt::ParallelizePlan plan;
    for (const char* n : {"attention.wq", "attention.wk", "attention.wv", "mlp.w1", "mlp.w3"})
      plan.push_back({n, dt::ColwiseParallel()});
    for (const char* n : {"attention.wo", "mlp.w2"}) plan.push_back({n, dt::RowwiseParallel()});
    dt::parallelize_module(block, mesh, plan);

    std::map<std::string, dt::Tensor> p;
    for (const auto& [name, t] : block.named_parameters()) p[name] = t.to_local().contiguous();
    HandBlock hand{p.at("attention_norm.weight"),
                   p.at("attention.wq.weight"),
                   p.at("attention.wk.weight"),
                   p.at("attention.wv.weight"),
                   p.at("attention.wo.weight"),
                   p.at("mlp_norm.weight"),
                   p.at("mlp.w1.weight"),
                   p.at("mlp.w2.weight"),
                   p.at("mlp.w3.weight"),
                   cfg.dim / cfg.n_heads,
                   cfg.norm_eps,
                   {},
                   nullptr};
    {
      std::vector<float> m(static_cast<size_t>(seq * seq), 0.0f);
      for (int64_t i = 0; i < seq; ++i)
        for (int64_t j = i + 1; j < seq; ++j)
          m[i * seq + j] = -std::numeric_limits<float>::infinity();
      hand.mask = dt::from_vector(m, {seq, seq});
    }

    dt::Generator gen(7);
    const dt::Tensor x = dt::randn({batch, seq, cfg.dim}, dt::TensorOptions(dt::kFloat32), &gen);
    const dt::DTensor xl = nn::local_dtensor(x);

    const dt::Tensor y_ref = ref(xl).to_local();
    dt::Tensor y_dt;
    std::string comm_str;
    {
      dt::CommDebugMode comm_mode;
      y_dt = block(xl).to_local();
      comm_str = comm_mode.str();
    }
    const dt::Tensor y_hand = hand.forward(x);
    double diff[2] = {max_abs_diff(y_dt, y_hand), max_abs_diff(y_dt, y_ref)};
    MPI_Allreduce(MPI_IN_PLACE, diff, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    const bool root = bench::rank() == 0;
    HandBlock hand_comm = hand;
    hand_comm.comm = mesh.communicator(0);
    // --profile dtensor|hand|hand_comm: run only that variant `iters` times, untimed, so a
    // profiler (perf, callgrind) sees one variant alone.
    const std::string profile = flags.str("profile", "");
    if (!profile.empty()) {
      for (int64_t i = 0; i < iters; ++i) {
        if (profile == "dtensor") {
          (void)block(xl);
        } else if (profile == "hand") {
          (void)hand.forward(x);
        } else if (profile == "hand_comm") {
          (void)hand_comm.forward(x);
        } else {
          DT_FAIL("[bench_tp] --profile %s: expected dtensor, hand or hand_comm", profile);
        }
      }
      return 0;
    }
    // Interleaved: each iteration runs the five variants, in a shuffled order, so load drift
    // on a shared machine affects them alike and no variant always runs after the same one.
    const bool no_grad = flags.i64("no_grad", 0) != 0;
    const auto st = bench::time_interleaved(
        {[&] {
           if (root) (void)ref(xl);
         },
         [&] {
           std::optional<dt::autograd::NoGradGuard> g;
           if (no_grad) g.emplace();
           (void)block(xl);
         },
         [&] { (void)hand.forward(x); }, [&] { (void)hand_comm.forward(x); },
         [&] {
           const dt::autograd::NoGradGuard g;
           (void)block(xl);
         }},
        warmup, iters, /*comm_world=*/true, /*shuffled=*/true);
    const bench::Stats &t_single = st[0], &t_dt = st[1], &t_hand = st[2], &t_hand_comm = st[3],
                       &t_nograd = st[4];
    const double overhead = t_dt.median / t_hand.median;
    const double speedup = t_single.median / t_dt.median;
    bench::print0(
        "# bench_tp: TransformerBlock forward (RMSNorm, causal attention, SwiGLU), float32,\n"
        "# dim=%lld heads=%lld hidden=%lld seq=%lld batch=%lld; median of %lld (max over ranks)\n",
        (long long)cfg.dim, (long long)cfg.n_heads,
        (long long)(cfg.hidden_dim > 0 ? cfg.hidden_dim : 4 * cfg.dim), (long long)seq,
        (long long)batch, (long long)iters);
    bench::print0("# collectives in one DTensor forward: %s\n", comm_str.c_str());
    bench::print0("# hand+comm: the hand-written block with dtensor's Communicator all-reduce\n");
    bench::print0("%-6s %10s %11s %9s %13s %11s %13s %8s %10s %10s\n", "ranks", "single_ms",
                  "dtensor_ms", "hand_ms", "hand+comm_ms", "nograd_ms", "dtensor/hand", "speedup",
                  "|dt-hand|", "|dt-single|");
    bench::print0("%-6d %10.3f %11.3f %9.3f %13.3f %11.3f %13.3f %8.2f %10.3g %10.3g\n", world,
                  t_single.median * 1e3, t_dt.median * 1e3, t_hand.median * 1e3,
                  t_hand_comm.median * 1e3, t_nograd.median * 1e3, overhead, speedup, diff[0],
                  diff[1]);
    auto rec = json.record("tp_block_forward");
    rec.add("ranks", world)
        .add("dim", cfg.dim)
        .add("heads", cfg.n_heads)
        .add("seq", seq)
        .add("batch", batch)
        .add("iters", iters)
        .add_stats("", t_dt)
        .add("baseline", "hand-written MPI (local GEMMs + MPI_Allreduce)")
        .add_stats("baseline", t_hand)
        .add("ratio_vs_baseline", overhead)
        .add_stats("hand_comm", t_hand_comm)
        .add("ratio_vs_hand_comm", t_dt.median / t_hand_comm.median)
        .add_stats("nograd", t_nograd)
        .add("ratio_nograd_vs_baseline", t_nograd.median / t_hand.median)
        .add_stats("single", t_single)
        .add("speedup_vs_single", speedup)
        .add("collectives", comm_str)
        .add("max_abs_diff_vs_hand", diff[0])
        .add("max_abs_diff_vs_single", diff[1]);
    json.write(rec);
    return diff[0] <= 1e-3 && diff[1] <= 1e-3 ? 0 : 1;
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", bench::rank(), e.what());
    return 1;
  }
}
