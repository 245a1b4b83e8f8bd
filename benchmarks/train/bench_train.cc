// Training step (forward + backward + SGD): a stack of residual MLP blocks
// (x + fc2(silu(fc1(x))), fc1 colwise, fc2 rowwise) trained with DTensor (nn +
// parallelize_module + autograd + optim::SGD) vs the same model on one device vs a hand-written
// MPI version of the same step on the same weight shards (local GEMMs through dtensor/ops/, one
// MPI_Allreduce per block in forward and one in backward, the gradients written out by hand).
// Run at each rank count:
//
//   mpirun -np N bench_train [--dim 256] [--hidden 0] [--layers 4] [--tokens 512] [--iters 20]
//                            [--warmup 2] [--json FILE] [--profile single|dtensor|hand]
//
// Times: median over iterations of the max over ranks (barrier before each run; the variants
// interleaved in a shuffled order); the single-device model trains on rank 0 alone while the
// other ranks wait. Every variant starts from the same weights and takes the same steps; the
// hand-written weights are checked against the DTensor model's after the run.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace bench = dtensor::bench;

namespace {

constexpr double kLr = 1e-3;

// x + fc2(silu(fc1(x))) per block; loss = sum(y * w) / numel.
class Stack : public nn::Module {
 public:
  Stack(int64_t layers, int64_t dim, int64_t hidden) {
    for (int64_t l = 0; l < layers; ++l) {
      blocks_.push_back(std::static_pointer_cast<nn::MLP>(register_module(
          std::to_string(l), std::make_shared<nn::MLP>(dim, hidden, nn::Activation::kSilu))));
    }
  }
  std::string type_name() const override { return "Stack"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    dt::DTensor h = x;
    for (const auto& b : blocks_) h = dt::add(h, (*b)(h));
    return h;
  }

 private:
  std::vector<std::shared_ptr<nn::MLP>> blocks_;
};

// The hand-written tensor-parallel step on this rank's shards: fc1 rows [hidden/N, dim] and
// bias, fc2 columns [dim, hidden/N] and the full fc2 bias.
struct HandStack {
  struct Block {
    dt::Tensor w1, b1, w2, b2;
    dt::Tensor x, h;  // saved activations
  };
  std::vector<Block> blocks;

  static void all_reduce(dt::Tensor& t) {
    if (dt::world_size() == 1) return;
    MPI_Allreduce(MPI_IN_PLACE, t.data<float>(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }

  void step(const dt::Tensor& x0, const dt::Tensor& w) {
    // Forward.
    dt::Tensor x = x0;
    for (Block& b : blocks) {
      b.x = x;
      b.h = dt::linear(x, b.w1, b.b1);                              // [T, hidden/N]
      dt::Tensor p = dt::linear(dt::silu(b.h), b.w2).contiguous();  // partial [T, dim]
      all_reduce(p);
      x = dt::add(dt::add(x, p), b.b2);
    }
    // Backward of sum(y * w) / numel, then SGD.
    dt::Tensor g = dt::mul(w, dt::Scalar(1.0 / static_cast<double>(x.numel())));
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
      Block& b = *it;
      const dt::Tensor s = dt::sigmoid(b.h);
      const dt::Tensor a = dt::mul(b.h, s);   // silu(h)
      const dt::Tensor ga = dt::mm(g, b.w2);  // [T, hidden/N]
      const dt::Tensor gw2 = dt::mm(g.transpose(0, 1), a);
      const dt::Tensor gb2 = dt::sum(g, {0});
      // silu'(h) = s (1 + h (1 - s))
      const dt::Tensor gh = dt::mul(ga, dt::add(s, dt::mul(b.h, dt::sub(s, dt::mul(s, s)))));
      const dt::Tensor gw1 = dt::mm(gh.transpose(0, 1), b.x);
      const dt::Tensor gb1 = dt::sum(gh, {0});
      dt::Tensor gx = dt::mm(gh, b.w1).contiguous();  // partial
      all_reduce(gx);
      g = dt::add(g, gx);
      for (auto [p, gp] : {std::pair{b.w1, gw1}, {b.b1, gb1}, {b.w2, gw2}, {b.b2, gb2}}) {
        dt::sub_(p, dt::mul(gp, dt::Scalar(kLr)));
      }
    }
  }
};

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t dim = flags.i64("dim", 256), layers = flags.i64("layers", 4);
  const int64_t hidden = flags.i64("hidden", 0) > 0 ? flags.i64("hidden", 0) : 4 * dim;
  const int64_t tokens = flags.i64("tokens", 512);
  const int64_t iters = flags.i64("iters", 20), warmup = flags.i64("warmup", 2);
  const int world = dt::world_size(), rank = dt::world_rank();

  dt::manual_seed(7);
  Stack single(layers, dim, hidden);
  dt::manual_seed(7);
  Stack tp(layers, dim, hidden);
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {world}, {"tp"});
  dt::ParallelizePlan plan = {{"*.fc1", dt::ColwiseParallel()}, {"*.fc2", dt::RowwiseParallel()}};
  dt::parallelize_module(tp, mesh, plan);
  dt::optim::SGD opt(tp.parameters(), dt::optim::SGDOptions(kLr));
  dt::optim::SGD opt_single(single.parameters(), dt::optim::SGDOptions(kLr));

  // The hand-written version starts from the DTensor model's shards.
  HandStack hand;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = std::to_string(l) + ".";
    hand.blocks.push_back({tp.get_parameter(p + "fc1.weight").to_local().clone(),
                           tp.get_parameter(p + "fc1.bias").to_local().clone(),
                           tp.get_parameter(p + "fc2.weight").to_local().clone(),
                           tp.get_parameter(p + "fc2.bias").to_local().clone(),
                           {},
                           {}});
  }
  dt::Generator gen(11);
  const dt::Tensor x = dt::randn({tokens, dim}, {}, &gen);
  const dt::Tensor w = dt::randn({tokens, dim}, {}, &gen);

  auto dtensor_step = [&](nn::Module& m, dt::optim::Optimizer& o) {
    o.zero_grad();
    const dt::DTensor y = m(nn::local_dtensor(x));
    const dt::DTensor loss = dt::div(dt::sum(dt::mul(y, nn::local_dtensor(w))),
                                     dt::Scalar(static_cast<double>(x.numel())));
    loss.backward();
    o.step();
  };
  const std::vector<std::function<void()>> variants = {
      [&] {
        if (rank == 0) dtensor_step(single, opt_single);
      },
      [&] { dtensor_step(tp, opt); },
      [&] { hand.step(x, w); },
  };
  if (flags.has("profile")) {
    // --profile single|dtensor|hand: that variant alone, `iters` times, untimed, so a profiler
    // (perf, callgrind) sees it alone.
    const std::string which = flags.str("profile", "");
    const char* names[] = {"single", "dtensor", "hand"};
    for (size_t v = 0; v < 3; ++v) {
      if (which != names[v]) continue;
      for (int64_t i = 0; i < iters; ++i) variants[v]();
      return 0;
    }
    DT_FAIL("[bench_train] --profile %s: expected single, dtensor or hand", which);
  }
  const std::vector<bench::Stats> st =
      bench::time_interleaved(variants, warmup, iters, /*comm_world=*/true, /*shuffled=*/true);

  // Same steps taken: the hand-written shards equal the DTensor model's.
  double diff = 0;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = std::to_string(l) + ".";
    const auto check = [&](const char* name, const dt::Tensor& mine) {
      const auto a = tp.get_parameter(p + name).to_local().to(dt::kFloat64).to_vector<double>();
      const auto b = mine.to(dt::kFloat64).to_vector<double>();
      for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
    };
    check("fc1.weight", hand.blocks[l].w1);
    check("fc2.weight", hand.blocks[l].w2);
  }
  MPI_Allreduce(MPI_IN_PLACE, &diff, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

  bench::JsonLines json("bench_train", flags.str("json", ""));
  bench::print0(
      "# bench_train: %lld residual MLP blocks (dim %lld, hidden %lld, silu), %lld tokens, "
      "float32, SGD; %d rank(s); median of %lld steps (max over ranks)\n",
      (long long)layers, (long long)dim, (long long)hidden, (long long)tokens, world,
      (long long)iters);
  bench::print0("%-14s %10s %10s %10s\n", "variant", "median_ms", "p10_ms", "p90_ms");
  const char* names[] = {"single-device", "dtensor", "hand-written"};
  for (size_t i = 0; i < st.size(); ++i) {
    bench::print0("%-14s %10.2f %10.2f %10.2f\n", names[i], st[i].median * 1e3, st[i].p10 * 1e3,
                  st[i].p90 * 1e3);
  }
  const double ratio = st[1].median / st[2].median;
  bench::print0("dtensor / hand-written: %.3f (target <= 1.05); weights max |diff| %.3g\n", ratio,
                diff);
  auto rec = json.record("train_step");
  rec.add("ranks", world)
      .add("dim", dim)
      .add("hidden", hidden)
      .add("layers", layers)
      .add("tokens", tokens)
      .add_stats("", st[1])
      .add_stats("single", st[0])
      .add("baseline", "hand-written MPI step")
      .add_stats("baseline", st[2])
      .add("ratio_vs_baseline", ratio)
      .add("max_weight_diff", diff);
  json.write(rec);
  return diff < 1e-3 ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
