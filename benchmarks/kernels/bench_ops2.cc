// Op coverage II speed (issue 44 item 4): the vision and loss ops through the user's path
// (DTensor ops on local DTensors, autograd recording), forward alone ("fwd") and forward +
// backward ("fwd+bwd": the output's backward with a fixed gradient, every input's gradient),
// float32, one intra-op thread. The same cases run under PyTorch in bench_ops2_torch.py, which
// runs this program too and prints both side by side (docs/PERFORMANCE.md, "Op coverage II").
//
//   bench_ops2 [--min-seconds 0.4] [--only SUBSTRING]     one line per case: name, median ms
//   mpirun -np 2 bench_ops2 --halo                        height-sharded conv: halo vs gather
//
// --halo: a 3x3 conv (stride 1, padding 1) on a Shard(2) input [8, 64, 56, 56] at the world's
// rank count, by the library's halo exchange (the op itself) and by gathering the height first
// (redistribute to Replicate, conv, chunk back to Shard(2)); forward and forward + backward,
// max over ranks per run; the two results are checked equal.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "dtensor/dtensor.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

dt::DTensor leaf(dt::IntSpan shape, uint64_t seed, bool grad, double lo = -1, double hi = 1) {
  dt::Generator gen(seed);
  dt::Tensor t = dt::rand(shape, dt::TensorOptions(dt::kFloat32), &gen);
  t = dt::add(dt::mul(t, dt::Scalar(hi - lo)), dt::Scalar(lo));
  dt::DTensor d = dt::nn::local_dtensor(t);
  if (grad) d.requires_grad_();
  return d;
}

struct Case {
  std::string name;
  std::function<dt::DTensor()> fwd;  // builds the output from leaves that require grad
  std::vector<dt::DTensor> leaves;   // their gradients are cleared before each fwd+bwd run
};

void run_cases(const std::vector<Case>& cases, double min_seconds, const std::string& only) {
  for (const Case& c : cases) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    // Forward alone: no graph is recorded (PyTorch's torch.no_grad()).
    auto fwd = [&] {
      dt::autograd::NoGradGuard ng;
      (void)c.fwd();
    };
    dt::DTensor out;
    {
      dt::autograd::NoGradGuard ng;
      out = c.fwd();
    }
    const dt::DTensor g = dt::ones_like(out);
    auto fwd_bwd = [&] {
      for (const dt::DTensor& l : c.leaves) l.set_grad(dt::DTensor());
      c.fwd().backward(g);
    };
    for (const auto& [label, fn] : std::vector<std::pair<const char*, std::function<void()>>>{
             {"fwd", fwd}, {"fwd+bwd", fwd_bwd}}) {
      const int64_t iters = bench::iters_for_budget(fn, min_seconds, 5, 200, false);
      const bench::Stats s = bench::time_runs(fn, 1, iters, false);
      std::printf("%-40s %-8s %10.3f ms  (p10 %.3f, p90 %.3f, n %lld)\n", c.name.c_str(), label,
                  s.median * 1e3, s.p10 * 1e3, s.p90 * 1e3, (long long)s.n);
      std::fflush(stdout);
    }
  }
}

std::vector<Case> make_cases() {
  std::vector<Case> cases;
  // ResNet-like convolutions (3x3 padding 1, a stride-2 3x3, a 1x1), batch 8, no bias.
  struct ConvShape {
    const char* name;
    int64_t n, cin, hw, cout, k, stride, pad;
  };
  for (const ConvShape& s : {ConvShape{"conv2d 8x64x56x56 k3 64", 8, 64, 56, 64, 3, 1, 1},
                             ConvShape{"conv2d 8x128x28x28 k3 128", 8, 128, 28, 128, 3, 1, 1},
                             ConvShape{"conv2d 8x128x28x28 k3 s2 256", 8, 128, 28, 256, 3, 2, 1},
                             ConvShape{"conv2d 8x256x14x14 k1 1024", 8, 256, 14, 1024, 1, 1, 0}}) {
    const dt::DTensor x = leaf({s.n, s.cin, s.hw, s.hw}, 1, true);
    const double b = 1.0 / std::sqrt(static_cast<double>(s.cin * s.k * s.k));
    const dt::DTensor w = leaf({s.cout, s.cin, s.k, s.k}, 2, true, -b, b);
    const int64_t st = s.stride, pd = s.pad;
    cases.push_back({s.name, [=] { return dt::conv2d(x, w, dt::DTensor(), {st}, {pd}); }, {x, w}});
  }
  {  // training-mode batch norm (running statistics updated), affine
    const dt::DTensor x = leaf({8, 64, 56, 56}, 3, true);
    const dt::DTensor w = leaf({64}, 4, true), bias = leaf({64}, 5, true);
    const dt::DTensor rm = dt::nn::local_dtensor(dt::zeros({64})),
                      rv = dt::nn::local_dtensor(dt::ones({64}));
    cases.push_back({"batch_norm 8x64x56x56 train",
                     [=] { return dt::batch_norm(x, rm, rv, w, bias, true); },
                     {x, w, bias}});
    cases.push_back({"group_norm 8x64x56x56 g32",
                     [=] { return dt::group_norm(x, 32, w, bias); },
                     {x, w, bias}});
  }
  {
    const dt::DTensor x = leaf({8, 64, 56, 56}, 6, true);
    cases.push_back(
        {"max_pool2d 8x64x56x56 k3 s2 p1", [=] { return dt::max_pool2d(x, {3}, {2}, {1}); }, {x}});
    cases.push_back(
        {"avg_pool2d 8x64x56x56 k2 s2", [=] { return dt::avg_pool2d(x, {2}, {2}); }, {x}});
    const dt::DTensor y = leaf({8, 64, 28, 28}, 7, true);
    cases.push_back({"interpolate 8x64x28x28 nearest x2",
                     [=] {
                       return dt::interpolate(y, {}, {2.0, 2.0}, "nearest");
                     },
                     {y}});
    cases.push_back({"interpolate 8x64x28x28 bilinear x2",
                     [=] {
                       return dt::interpolate(y, {}, {2.0, 2.0}, "bilinear", false);
                     },
                     {y}});
  }
  {  // losses over [256, 4096] (mean), the class losses over [4096, 1000]
    const dt::DTensor in = leaf({256, 4096}, 8, true);
    const dt::DTensor tg = leaf({256, 4096}, 9, false);
    const dt::DTensor prob = leaf({256, 4096}, 10, false, 0.01, 1.0);
    cases.push_back({"mse_loss 256x4096", [=] { return dt::mse_loss(in, tg); }, {in}});
    cases.push_back({"l1_loss 256x4096", [=] { return dt::l1_loss(in, tg); }, {in}});
    cases.push_back({"smooth_l1_loss 256x4096", [=] { return dt::smooth_l1_loss(in, tg); }, {in}});
    cases.push_back({"bce_with_logits 256x4096",
                     [=] { return dt::binary_cross_entropy_with_logits(in, prob); },
                     {in}});
    cases.push_back({"kl_div 256x4096 batchmean",
                     [=] { return dt::kl_div(in, prob, dt::Reduction::kBatchMean); },
                     {in}});
    const dt::DTensor logits = leaf({4096, 1000}, 11, true, -3, 3);
    dt::Generator gen(12);
    const dt::DTensor target =
        dt::nn::local_dtensor(dt::randint(0, 1000, {4096}, dt::TensorOptions(dt::kInt64), &gen));
    cases.push_back(
        {"cross_entropy 4096x1000", [=] { return dt::cross_entropy(logits, target); }, {logits}});
    cases.push_back({"nll_loss 4096x1000", [=] { return dt::nll_loss(logits, target); }, {logits}});
    // class weights with label smoothing, and probability targets (not normalised: neither
    // PyTorch nor dtensor requires it)
    const dt::DTensor weight = leaf({1000}, 13, false, 0.5, 1.5);
    cases.push_back(
        {"cross_entropy 4096x1000 weight ls0.1",
         [=] { return dt::cross_entropy(logits, target, dt::Reduction::kMean, -100, 0.1, weight); },
         {logits}});
    const dt::DTensor probs = leaf({4096, 1000}, 14, false, 0.0, 1.0);
    cases.push_back({"cross_entropy 4096x1000 probs",
                     [=] { return dt::cross_entropy(logits, probs); },
                     {logits}});
  }
  return cases;
}

// Height-sharded conv at the world's rank count: halo exchange (the op) vs gather.
int run_halo(double min_seconds) {
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"sp"});
  const int64_t N = 8, C = 64, H = 56;
  dt::Generator gen(1);
  const dt::Tensor full = dt::randn({N, C, H, H}, dt::TensorOptions(dt::kFloat32), &gen);
  const dt::Tensor wfull =
      dt::mul(dt::randn({C, C, 3, 3}, dt::TensorOptions(dt::kFloat32), &gen), dt::Scalar(0.04));
  dt::DTensor x = dt::distribute_tensor(full, mesh, {dt::Shard(2)});
  dt::DTensor w = dt::distribute_tensor(wfull, mesh, {dt::Replicate()});
  x.requires_grad_();
  w.requires_grad_();
  auto halo = [&] { return dt::conv2d(x, w, dt::DTensor(), {1}, {1}); };
  auto gather = [&] {
    const dt::DTensor xr = x.redistribute(mesh, {dt::Replicate()});
    return dt::conv2d(xr, w, dt::DTensor(), {1}, {1}).redistribute(mesh, {dt::Shard(2)});
  };
  dt::DTensor a, b;
  {
    dt::autograd::NoGradGuard ng;
    a = halo();
    b = gather();
  }
  const double diff = dt::max(dt::abs(dt::sub(a.full_tensor(), b.full_tensor()))).item<float>();
  const dt::DTensor g = dt::ones_like(a);  // Shard(2), as both outputs
  const bool root = dt::world_rank() == 0;
  if (root) {
    std::printf(
        "height-sharded conv2d [%lld, %lld, %lld, %lld] k3 p1 -> %lld channels, %d ranks "
        "(max |halo - gather| %.3g)\n",
        (long long)N, (long long)C, (long long)H, (long long)H, (long long)C, dt::world_size(),
        diff);
  }
  std::vector<std::function<void()>> fns;
  fns.push_back([&] {
    dt::autograd::NoGradGuard ng;
    (void)halo();
  });
  fns.push_back([&] {
    dt::autograd::NoGradGuard ng;
    (void)gather();
  });
  fns.push_back([&] {
    x.set_grad(dt::DTensor());
    w.set_grad(dt::DTensor());
    halo().backward(g);
  });
  fns.push_back([&] {
    x.set_grad(dt::DTensor());
    w.set_grad(dt::DTensor());
    gather().backward(g);
  });
  const int64_t iters = bench::iters_for_budget(fns[3], min_seconds, 5, 100, true);
  const std::vector<bench::Stats> s = bench::time_interleaved(fns, 1, iters, true);
  const char* names[] = {"halo fwd", "gather fwd", "halo fwd+bwd", "gather fwd+bwd"};
  for (size_t i = 0; i < s.size() && root; ++i) {
    std::printf("%-16s %10.3f ms  (p10 %.3f, p90 %.3f, n %lld)\n", names[i], s[i].median * 1e3,
                s[i].p10 * 1e3, s[i].p90 * 1e3, (long long)s[i].n);
  }
  return diff <= 1e-4 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  const bench::Flags flags(argc, argv);
  dt::set_num_threads(flags.i64("threads", 1));
  const double min_seconds = flags.f64("min-seconds", 0.4);
  if (flags.has("halo")) return run_halo(min_seconds);
  run_cases(make_cases(), min_seconds, flags.str("only", ""));
  return 0;
}
