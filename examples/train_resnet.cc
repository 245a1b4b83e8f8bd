// Training a small ResNet on a synthetic image task, in one of two parallel modes (issue 44):
//
//   mpirun -np 4 ./train_resnet --mode dp        # data parallel, synchronised batch norm
//   mpirun -np 4 ./train_resnet --mode spatial   # image height sharded, halo-exchange convs
//
// The network: stem (conv 3x3 + batch norm + relu), a residual basic block (conv-bn-relu-conv-bn
// + identity, relu), max_pool 2x2, a second basic block, adaptive_avg_pool to 1x1 and a linear
// head, trained with cross_entropy and SGD with momentum. Each image is [3, H, W] noise over a
// pattern its class decides (horizontal stripes, vertical stripes, a checkerboard, a bright
// top half), so the task is learnable in a few dozen steps. Batches come from fixed seeds.
//
// Both modes use plain DTensor semantics on a 1-D mesh over every rank: distribute_module
// replicates the parameters (Replicate; their gradients arrive Partial and are all-reduced by
// autograd), and the inputs are laid out by the user:
//   --mode dp:      images and labels Shard(0) (the batch). The BatchNorm2d layers are
//                   SyncBatchNorm by construction: batch_norm on a batch-sharded DTensor computes
//                   the global statistics with one all-reduce, and the running statistics are
//                   identical on every rank.
//   --mode spatial: images Shard(2) (the height), labels Replicate. The 3x3 convolutions (stride
//                   1, padding 1) exchange one halo row with each neighbour instead of gathering;
//                   batch norm reduces its statistics over the shards (one all-reduce). The
//                   pools have no spatial strategy yet (no halo exchange): max_pool2d moves its
//                   input to the batch-sharded layout (all_to_all), so a forward hook on the
//                   max pool moves its output back to Shard(2) (all_to_all) for the second
//                   block's convolutions; the head's small tensors take what the strategies
//                   choose (--comm-table lists every collective by module and op).
//
// Every rank also trains the same model on one device on the same (whole) batches; the losses of
// every step and the final parameters and running statistics must agree within --tol. Rank 0
// prints the mode, the collectives of one step and a progress line every --log-every steps.
// Exit status 0 when both agree and the final loss (mean of the last 5 steps) is below
// --threshold; 1 otherwise; 2 on a bad flag.
#include <dtensor/dtensor.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace dt = dtensor;
namespace nn = dtensor::nn;

namespace {

struct Args {
  std::string mode = "dp";  // dp | spatial
  int64_t batch = 16, size = 16, channels = 8, classes = 4, steps = 40, log_every = 5;
  double lr = 0.05, momentum = 0.9, noise = 0.5, threshold = 0.3, tol = -1;
  bool f64 = false;
  bool comm_table = false;  // --comm-table: the collectives of step 1 per module and op
  uint64_t seed = 1234;
};

const char* kUsage =
    "usage: train_resnet [--mode dp|spatial] [--batch N] [--size N] [--channels N]\n"
    "                    [--classes N] [--steps N] [--lr X] [--momentum X] [--noise X]\n"
    "                    [--log-every N] [--threshold X] [--tol X] [--seed N] [--float64]\n"
    "  trains a small ResNet (conv + batch norm + relu, two basic blocks, max pool, adaptive\n"
    "  avg pool, linear) on --batch synthetic [3, --size, --size] images of --classes (<= 4)\n"
    "  patterns with cross_entropy and SGD (momentum). --mode dp: the batch sharded over every\n"
    "  rank, batch norm with global statistics; --mode spatial: the image height sharded, the\n"
    "  convolutions exchange halos. Checks every loss and the final parameters equal\n"
    "  single-device training within --tol (default 1e-4, float64: 1e-10) and the final loss\n"
    "  (mean of the last 5 steps) below --threshold. --comm-table: the collectives of one step\n"
    "  per module and op.\n";

// Parses flags; returns 0 to run, 1 after --help, 2 on a bad flag.
int parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--help" || f == "-h") return 1;
    if (f == "--float64") {
      a.f64 = true;
      continue;
    }
    if (f == "--comm-table") {
      a.comm_table = true;
      continue;
    }
    if (i + 1 >= argc) return 2;
    const char* v = argv[++i];
    if (f == "--mode")
      a.mode = v;
    else if (f == "--batch")
      a.batch = std::atoll(v);
    else if (f == "--size")
      a.size = std::atoll(v);
    else if (f == "--channels")
      a.channels = std::atoll(v);
    else if (f == "--classes")
      a.classes = std::atoll(v);
    else if (f == "--steps")
      a.steps = std::atoll(v);
    else if (f == "--log-every")
      a.log_every = std::max<int64_t>(1, std::atoll(v));
    else if (f == "--lr")
      a.lr = std::atof(v);
    else if (f == "--momentum")
      a.momentum = std::atof(v);
    else if (f == "--noise")
      a.noise = std::atof(v);
    else if (f == "--threshold")
      a.threshold = std::atof(v);
    else if (f == "--tol")
      a.tol = std::atof(v);
    else if (f == "--seed")
      a.seed = std::strtoull(v, nullptr, 10);
    else
      return 2;
  }
  if (a.tol < 0) a.tol = a.f64 ? 1e-10 : 1e-4;
  const bool mode_ok = a.mode == "dp" || a.mode == "spatial";
  // The max pool halves the size; the second block's 3x3 convs need at least 2 rows.
  return mode_ok && a.batch >= 1 && a.size >= 4 && a.size % 2 == 0 && a.channels >= 1 &&
                 a.classes >= 2 && a.classes <= 4 && a.steps >= 1
             ? 0
             : 2;
}

// A 3x3 convolution, stride 1, padding 1 (the size kept), no bias (a batch norm follows).
nn::ModulePtr conv3x3(int64_t in, int64_t out, const nn::ModuleOptions& o) {
  return std::make_shared<nn::Conv2d>(in, out, dt::IntSpan{3}, dt::IntSpan{1}, dt::IntSpan{1},
                                      dt::IntSpan{1}, 1, false, o);
}

// conv 3x3 -> batch norm -> relu, twice with the identity added before the second relu
// (ResNet's BasicBlock without downsampling).
class BasicBlock : public nn::Module {
 public:
  BasicBlock(int64_t c, const nn::ModuleOptions& o) {
    conv1_ = register_module("conv1", conv3x3(c, c, o));
    bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(c, 1e-5, 0.1, true, true, o));
    conv2_ = register_module("conv2", conv3x3(c, c, o));
    bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(c, 1e-5, 0.1, true, true, o));
  }
  std::string type_name() const override { return "BasicBlock"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    const dt::DTensor h = dt::relu((*bn1_)((*conv1_)(x)));
    return dt::relu(dt::add((*bn2_)((*conv2_)(h)), x));
  }

 private:
  nn::ModulePtr conv1_, bn1_, conv2_, bn2_;
};

class ResNet : public nn::Module {
 public:
  ResNet(int64_t c, int64_t classes, const nn::ModuleOptions& o) {
    conv_ = register_module("conv1", conv3x3(3, c, o));
    bn_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(c, 1e-5, 0.1, true, true, o));
    layer1_ = register_module("layer1", std::make_shared<BasicBlock>(c, o));
    pool_ = register_module("maxpool", std::make_shared<nn::MaxPool2d>(dt::IntSpan{2}));
    layer2_ = register_module("layer2", std::make_shared<BasicBlock>(c, o));
    avgpool_ = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(dt::IntSpan{1}));
    fc_ = register_module("fc", std::make_shared<nn::Linear>(c, classes, true, o));
  }
  std::string type_name() const override { return "ResNet"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    dt::DTensor h = dt::relu((*bn_)((*conv_)(x)));
    h = (*pool_)((*layer1_)(h));
    h = (*avgpool_)((*layer2_)(h));  // [N, C, 1, 1]
    return (*fc_)(dt::flatten(h, 1));
  }
  nn::Module& maxpool() { return *pool_; }

 private:
  nn::ModulePtr conv_, bn_, layer1_, pool_, layer2_, avgpool_, fc_;
};

// The batch of `step` (the same on every rank): images [B, 3, S, S] and labels [B] (int64).
struct Batch {
  dt::Tensor images, labels;
};

Batch make_batch(const Args& a, int64_t step, dt::DType dtype) {
  dt::Generator gen(a.seed * 1000003 + static_cast<uint64_t>(step));
  const int64_t B = a.batch, S = a.size;
  Batch b;
  b.labels = dt::randint(0, a.classes, {B}, dt::TensorOptions(dt::kInt64), &gen);
  dt::Tensor img = dt::randn({B, 3, S, S}, dt::TensorOptions(dt::kFloat64), &gen);
  auto px = img.data<double>();
  const auto lab = b.labels.data<int64_t>();
  for (int64_t n = 0; n < B; ++n) {
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t h = 0; h < S; ++h) {
        for (int64_t w = 0; w < S; ++w) {
          const int64_t k = lab[n];
          const bool on = k == 0   ? h % 2 == 0
                          : k == 1 ? w % 2 == 0
                          : k == 2 ? (h + w) % 2 == 0
                                   : h < S / 2;
          double& v = px[((n * 3 + c) * S + h) * S + w];
          v = a.noise * v + (on ? 1.0 : -1.0);
        }
      }
    }
  }
  b.images = img.to(dtype);
  return b;
}

// One step: forward, cross_entropy, backward, SGD; returns the loss.
double train_step(nn::Module& model, dt::optim::Optimizer& opt, const dt::DTensor& images,
                  const dt::DTensor& labels) {
  opt.zero_grad();
  const dt::DTensor loss = dt::cross_entropy(model(images), labels);
  loss.backward();
  opt.step();
  return loss.full_tensor().to(dt::kFloat64).item<double>();
}

double max_abs_diff(const dt::DTensor& x, const dt::DTensor& y) {
  const dt::Tensor u = x.full_tensor().to(dt::kFloat64).contiguous();
  const dt::Tensor v = y.full_tensor().to(dt::kFloat64).contiguous();
  const auto pu = u.data<double>();
  const auto pv = v.data<double>();
  double m = 0;
  for (int64_t i = 0; i < u.numel(); ++i) m = std::max(m, std::abs(pu[i] - pv[i]));
  return m;
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
    const bool dp = a.mode == "dp";
    const dt::DType dtype = a.f64 ? dt::kFloat64 : dt::kFloat32;
    const nn::ModuleOptions opts{.dtype = dtype};
    // The same seed gives both models the same weights.
    dt::manual_seed(a.seed);
    ResNet model(a.channels, a.classes, opts);
    dt::manual_seed(a.seed);
    ResNet ref(a.channels, a.classes, opts);

    const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {world}, {dp ? "dp" : "sp"});
    dt::distribute_module(model, mesh);  // every parameter Replicate on the mesh
    if (!dp) {
      // Keep the second block height-sharded: the pool's output comes batch-sharded (see the
      // file comment).
      model.maxpool().register_forward_hook(
          [&mesh](nn::Module&, const dt::DTensor&, dt::DTensor& y) {
            return std::move(y).redistribute(mesh, {dt::Shard(2)});
          });
    }
    const auto sgd = dt::optim::SGDOptions(a.lr).momentum(a.momentum);
    dt::optim::SGD opt(model.parameters(), sgd);
    dt::optim::SGD ref_opt(ref.parameters(), sgd);

    int64_t n_params = 0;
    for (const auto& [name, p] : model.named_parameters()) n_params += p.numel();
    if (rank == 0) {
      std::printf(
          "train_resnet: %d rank(s), mode %s (%s), batch=%lld images [3, %lld, %lld], "
          "channels=%lld classes=%lld, %lld parameters, %s, SGD lr=%g momentum=%g\n",
          world, a.mode.c_str(),
          dp ? "images and labels Shard(0), parameters Replicate, synchronised batch norm"
             : "images Shard(2), labels and parameters Replicate, halo-exchange convolutions",
          (long long)a.batch, (long long)a.size, (long long)a.size, (long long)a.channels,
          (long long)a.classes, (long long)n_params, std::string(dt::dtype_name(dtype)).c_str(),
          a.lr, a.momentum);
      std::printf("%s\n", dt::config_str().c_str());
    }

    const dt::Placements img_place{dp ? dt::Placement(dt::Shard(0)) : dt::Shard(2)};
    const dt::Placements lab_place{dp ? dt::Placement(dt::Shard(0)) : dt::Replicate()};
    std::vector<double> losses;
    double max_loss_diff = 0;
    for (int64_t step = 0; step < a.steps; ++step) {
      const Batch b = make_batch(a, step, dtype);
      const dt::DTensor images = dt::distribute_tensor(b.images, mesh, img_place);
      const dt::DTensor labels = dt::distribute_tensor(b.labels, mesh, lab_place);
      double loss;
      if (step == 1) {  // the first step after the caches are warm
        dt::CommDebugMode comm;
        loss = train_step(model, opt, images, labels);
        if (rank == 0) {
          std::printf("collectives of one training step (forward + backward + SGD): %s\n",
                      comm.str().c_str());
          if (a.comm_table) std::printf("%s\n", comm.table().c_str());
        }
      } else {
        loss = train_step(model, opt, images, labels);
      }
      const double want =
          train_step(ref, ref_opt, nn::local_dtensor(b.images), nn::local_dtensor(b.labels));
      max_loss_diff =
          std::max(max_loss_diff, std::abs(loss - want) / std::max(1.0, std::abs(want)));
      losses.push_back(loss);
      if (rank == 0 && (step % a.log_every == 0 || step + 1 == a.steps)) {
        std::printf("step %4lld/%lld  loss %.4f  (single device %.4f)\n", (long long)step,
                    (long long)a.steps, loss, want);
        std::fflush(stdout);
      }
    }

    // Final parameters and the batch norms' running statistics against the single device.
    double max_param_diff = 0;
    const auto got = model.named_parameters(), want = ref.named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      max_param_diff = std::max(max_param_diff, max_abs_diff(got[i].second, want[i].second));
    }
    double max_stat_diff = 0;
    const auto mods = model.named_modules(), ref_mods = ref.named_modules();
    for (size_t i = 0; i < mods.size(); ++i) {
      const auto* bn = dynamic_cast<const nn::BatchNorm*>(mods[i].second);
      const auto* rbn = dynamic_cast<const nn::BatchNorm*>(ref_mods[i].second);
      if (bn == nullptr || rbn == nullptr) continue;
      max_stat_diff =
          std::max({max_stat_diff, max_abs_diff(bn->running_mean(), rbn->running_mean()),
                    max_abs_diff(bn->running_var(), rbn->running_var())});
    }
    // Every rank decides alike (the worst differences are shared).
    dt::Tensor d =
        dt::from_vector(std::vector<double>{max_loss_diff, max_param_diff, max_stat_diff}, {3});
    dt::world_communicator()->all_reduce(d, dt::ReduceOp::kMax)->wait();
    const auto dd = d.data<double>();
    max_loss_diff = dd[0];
    max_param_diff = dd[1];
    max_stat_diff = dd[2];

    const size_t tail = std::min<size_t>(5, losses.size());
    double final_loss = 0;
    for (size_t i = losses.size() - tail; i < losses.size(); ++i) final_loss += losses[i] / tail;
    const bool learned = final_loss < a.threshold;
    const bool agrees = max_loss_diff <= a.tol && max_param_diff <= a.tol && max_stat_diff <= a.tol;
    if (rank == 0) {
      std::printf("final loss (mean of the last %zu steps) %.4f (threshold %.3g) -> %s\n", tail,
                  final_loss, a.threshold, learned ? "learned" : "NOT LEARNED");
      std::printf(
          "%s vs single device over %lld steps: max relative loss difference %.3g, max parameter "
          "difference %.3g, max running-statistics difference %.3g (tolerance %.3g) -> %s\n",
          dp ? "data parallel" : "spatially sharded", (long long)a.steps, max_loss_diff,
          max_param_diff, max_stat_diff, a.tol, agrees ? "OK" : "MISMATCH");
    }
    return learned && agrees ? 0 : 1;
  } catch (const dt::Error& e) {
    std::cerr << "rank " << rank << ": " << e.what() << "\n";
    return 1;
  }
}
