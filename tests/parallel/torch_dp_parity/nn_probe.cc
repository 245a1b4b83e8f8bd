// dtensor half of the nn-module side-by-side probe (round 6); nn_probe.py is the PyTorch half
// (its comment says what each case records) and `compare.py nn` prints the differences. One
// process, float64. Not built with the tree: from the repository root
//   c++ -std=c++20 -I. -Ibuild/generated -isystem /usr/lib/x86_64-linux-gnu/openmpi/include \
//       tests/parallel/torch_dp_parity/nn_probe.cc build/dtensor/*/lib*.so -lmpi -o /tmp/nn_probe
// then /tmp/nn_probe (LD_LIBRARY_PATH naming the build/dtensor/* folders; writes dt_nn.json)
// beside torch_nn.json.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/torch_dp_parity/json_out.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::DTensor;
using dt::Tensor;

namespace {
using namespace probe_json;

Tensor det(const dt::Shape& shape, int salt = 0, double lo = -2.5, double step = 0.5) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = lo + step * static_cast<double>((i * 7 + salt) % 11);
  return dt::from_vector(v, shape);
}

void run_case(const std::string& name, const std::function<nn::ModulePtr()>& make,
              const dt::Shape& shape, const std::string& modes = "t", int salt = 1,
              double lo = -2.5, double step = 0.5) {
  try {
    nn::ModulePtr m = make();
    std::string keys;
    for (auto& [n, p] : m->named_parameters())
      keys += (keys.empty() ? "" : " ") + n + ints(p.shape()).substr(0);
    for (auto& [n, b] : m->named_buffers()) keys += (keys.empty() ? "" : " ") + n + ints(b.shape());
    rec_value(name + " keys", keys);
    int k = 0;
    for (auto& [n, p] : m->named_parameters()) {
      std::vector<double> v(static_cast<size_t>(p.numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.3 * std::sin(0.37 * i + 1.1 * k + 0.2);
      m->set_parameter(n, nn::local_dtensor(dt::from_vector(v, p.shape())));
      ++k;
    }
    DTensor x, y;
    for (size_t i = 0; i < modes.size(); ++i) {
      m->train(modes[i] == 't');
      x = nn::local_dtensor(det(shape, salt + static_cast<int>(i), lo, step));
      x.requires_grad_(true);
      y = (*m)(x);
      rec(name + " fwd" + std::to_string(i) + " " + modes[i], y, true);
    }
    dt::sum(dt::mul(y, nn::local_dtensor(det(y.shape(), 5, -1.0, 0.25)))).backward();
    rec(name + " dx", x.grad(), true);
    for (auto& [n, p] : m->named_parameters()) rec(name + " d" + n, p.grad(), true);
    for (auto& [n, b] : m->named_buffers()) rec(name + " buf " + n, b, true);
  } catch (const std::exception& e) {
    rec_error(name, e);
  }
}

void loss_case(const std::string& name, const std::function<DTensor(DTensor, DTensor)>& f,
               const dt::Shape& shape, const Tensor& target) {
  try {
    DTensor x = nn::local_dtensor(det(shape, 2, -1.0, 0.2));
    x.requires_grad_(true);
    const DTensor y = f(x, nn::local_dtensor(target));
    rec(name + " fwd", y, true);
    dt::sum(dt::mul(y, nn::local_dtensor(det(y.shape(), 5, -1.0, 0.25)))).backward();
    rec(name + " dx", x.grad(), true);
  } catch (const std::exception& e) {
    rec_error(name, e);
  }
}

template <class M, class... A>
std::function<nn::ModulePtr()> mk(A... a) {
  return [=] { return std::static_pointer_cast<nn::Module>(std::make_shared<M>(a...)); };
}
DTensor vec(std::vector<double> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return nn::local_dtensor(dt::from_vector(v, {n}));
}
}  // namespace

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);
  const nn::ModuleOptions f64{.dtype = dt::kFloat64};
  using O = std::optional<double>;
  using std::nullopt;
  run_case("LayerNorm", mk<nn::LayerNorm>(4, 1e-5, true, f64), {3, 4});
  run_case("LayerNorm noaffine", mk<nn::LayerNorm>(4, 1e-5, false, f64), {3, 4});
  run_case("LayerNorm eps", mk<nn::LayerNorm>(4, 0.5, true, f64), {3, 4});
  run_case("RMSNorm", mk<nn::RMSNorm>(4, O(), f64), {3, 4});
  run_case("RMSNorm eps", mk<nn::RMSNorm>(4, O(0.5), f64), {3, 4});
  run_case("LayerNorm nobias", mk<nn::LayerNorm>(4, 1e-5, true, false, f64), {3, 4});
  run_case("RMSNorm noaffine", mk<nn::RMSNorm>(4, O(), false, f64), {3, 4});
  run_case("BatchNorm1d", mk<nn::BatchNorm1d>(3, 1e-5, O(0.1), true, true, f64), {5, 3}, "ttte");
  run_case("BatchNorm1d 3d", mk<nn::BatchNorm1d>(3, 1e-5, O(0.1), true, true, f64), {2, 3, 4},
           "tte");
  run_case("BatchNorm1d mom None", mk<nn::BatchNorm1d>(3, 1e-5, O(), true, true, f64), {5, 3},
           "ttte");
  run_case("BatchNorm1d noaffine", mk<nn::BatchNorm1d>(3, 1e-5, O(0.1), false, true, f64), {5, 3},
           "tte");
  run_case("BatchNorm1d nostats", mk<nn::BatchNorm1d>(3, 1e-5, O(0.1), true, false, f64), {5, 3},
           "tte");
  run_case("BatchNorm2d", mk<nn::BatchNorm2d>(2, 0.1, O(0.3), true, true, f64), {2, 2, 3, 2},
           "tte");
  run_case("GroupNorm", mk<nn::GroupNorm>(2, 4, 1e-5, true, f64), {2, 4, 3});
  run_case("GroupNorm noaffine", mk<nn::GroupNorm>(2, 4, 1e-5, false, f64), {2, 4, 3});
  run_case("GroupNorm 4d", mk<nn::GroupNorm>(1, 2, 0.2, true, f64), {2, 2, 2, 3});
  run_case("InstanceNorm1d", mk<nn::InstanceNorm1d>(3, 1e-5, 0.1, false, false, f64), {2, 3, 4},
           "te");
  run_case("InstanceNorm1d affine stats", mk<nn::InstanceNorm1d>(3, 1e-5, 0.1, true, true, f64),
           {2, 3, 4}, "tte");
  run_case("InstanceNorm2d stats", mk<nn::InstanceNorm2d>(2, 1e-5, 0.5, false, true, f64),
           {2, 2, 3, 2}, "tte");
  run_case("InstanceNorm1d momentum None", mk<nn::InstanceNorm1d>(3, 1e-5, O(), true, true, f64),
           {2, 3, 4}, "tte");
  run_case("InstanceNorm1d unbatched", mk<nn::InstanceNorm1d>(3, 1e-5, 0.1, true, false, f64),
           {3, 4});
  run_case("Linear", mk<nn::Linear>(4, 3, true, f64), {2, 4});
  run_case("Linear nobias", mk<nn::Linear>(4, 3, false, f64), {2, 4});
  run_case("Linear 3d", mk<nn::Linear>(4, 2, true, f64), {2, 3, 4});
  using V = std::vector<int64_t>;
  auto conv1 = [&](int64_t i, int64_t o, V k, V s, V p, V d, int64_t g, bool b) {
    return [=] { return nn::ModulePtr(std::make_shared<nn::Conv1d>(i, o, k, s, p, d, g, b, f64)); };
  };
  auto conv2 = [&](int64_t i, int64_t o, V k, V s, V p, V d, int64_t g, bool b) {
    return [=] { return nn::ModulePtr(std::make_shared<nn::Conv2d>(i, o, k, s, p, d, g, b, f64)); };
  };
  run_case("Conv1d", conv1(2, 3, {3}, {1}, {0}, {1}, 1, true), {2, 2, 6});
  run_case("Conv1d s2 p1 d2 g", conv1(4, 2, {3}, {2}, {1}, {2}, 2, true), {1, 4, 9});
  run_case("Conv1d nobias unbatched", conv1(2, 2, {2}, {1}, {0}, {1}, 1, false), {2, 5});
  run_case("Conv2d", conv2(2, 2, {2, 3}, {2, 1}, {1, 0}, {1}, 1, true), {1, 2, 5, 5});
  run_case("Conv2d groups dil", conv2(4, 4, {3}, {1}, {2}, {2}, 4, true), {1, 4, 4, 4});
  run_case("Conv3d",
           [&] {
             return nn::ModulePtr(
                 std::make_shared<nn::Conv3d>(1, 2, V{2}, V{1}, V{1}, V{1}, 1, true, f64));
           },
           {1, 1, 2, 3, 2});
  auto conv = [&](auto make) { return [=] { return nn::ModulePtr(make()); }; };
  run_case("Conv1d same asym", conv([=] {
             return std::make_shared<nn::Conv1d>(2, 2, V{4}, V{1}, "same", V{1}, 1, true, "zeros",
                                                 f64);
           }),
           {2, 2, 6});
  run_case("Conv2d same dil reflect", conv([=] {
             return std::make_shared<nn::Conv2d>(2, 2, V{2, 3}, V{1}, "same", V{1, 2}, 1, true,
                                                 "reflect", f64);
           }),
           {1, 2, 4, 5});
  run_case("Conv1d replicate unbatched", conv([=] {
             return std::make_shared<nn::Conv1d>(2, 2, V{3}, V{1}, V{2}, V{1}, 1, true, "replicate",
                                                 f64);
           }),
           {2, 5});
  run_case("Conv2d circular s2", conv([=] {
             return std::make_shared<nn::Conv2d>(2, 2, V{3}, V{2}, V{1, 2}, V{1}, 1, true,
                                                 "circular", f64);
           }),
           {1, 2, 4, 4});
  run_case("Conv3d valid", conv([=] {
             return std::make_shared<nn::Conv3d>(1, 2, V{2}, V{1}, "valid", V{1}, 1, true, "zeros",
                                                 f64);
           }),
           {1, 1, 2, 3, 2});
  run_case("Conv3d same circular", conv([=] {
             return std::make_shared<nn::Conv3d>(1, 1, V{2}, V{1}, "same", V{1}, 1, true,
                                                 "circular", f64);
           }),
           {1, 1, 2, 3, 2});
  run_case("ConvTranspose1d",
           [&] {
             return nn::ModulePtr(std::make_shared<nn::ConvTranspose1d>(2, 3, V{3}, V{2}, V{1},
                                                                        V{1}, 1, true, V{1}, f64));
           },
           {1, 2, 4});
  run_case("ConvTranspose2d g d",
           [&] {
             return nn::ModulePtr(std::make_shared<nn::ConvTranspose2d>(4, 2, V{2}, V{2}, V{0},
                                                                        V{0}, 2, true, V{2}, f64));
           },
           {1, 4, 3, 3});
  run_case("ConvTranspose3d",
           [&] {
             return nn::ModulePtr(std::make_shared<nn::ConvTranspose3d>(1, 1, V{2}, V{1}, V{0},
                                                                        V{0}, 1, false, V{1}, f64));
           },
           {1, 1, 2, 2, 2});
  run_case("MaxPool1d", mk<nn::MaxPool1d>(V{2}), {1, 2, 7});
  run_case("MaxPool1d ceil pad dil", mk<nn::MaxPool1d>(V{3}, V{2}, V{1}, V{2}, true), {1, 1, 9});
  run_case("MaxPool2d", mk<nn::MaxPool2d>(V{2, 3}, V{1, 2}, V{1, 1}), {1, 1, 4, 5});
  run_case("MaxPool2d ceil", mk<nn::MaxPool2d>(V{2}, V{}, V{0}, V{1}, true), {1, 2, 5, 5});
  run_case("AvgPool1d", mk<nn::AvgPool1d>(V{3}, V{2}, V{1}), {1, 2, 7});
  run_case("AvgPool1d nocount ceil", mk<nn::AvgPool1d>(V{3}, V{2}, V{1}, true, false), {1, 2, 8});
  run_case("AvgPool2d", mk<nn::AvgPool2d>(V{2}), {1, 1, 4, 5});
  run_case("AvgPool2d pad nocount", mk<nn::AvgPool2d>(V{3}, V{2}, V{1}, false, false),
           {1, 1, 5, 5});
  run_case("AvgPool2d divisor",
           mk<nn::AvgPool2d>(V{2}, V{1}, V{0}, false, true, std::optional<int64_t>(3)),
           {1, 1, 3, 3});
  run_case("AvgPool2d ceil", mk<nn::AvgPool2d>(V{2}, V{}, V{0}, true), {1, 1, 5, 5});
  run_case("AdaptiveAvgPool2d", mk<nn::AdaptiveAvgPool2d>(V{2, 3}), {1, 2, 5, 4});
  run_case("AdaptiveAvgPool2d 1", mk<nn::AdaptiveAvgPool2d>(V{1}), {2, 2, 3, 3});
  using D = std::vector<double>;
  run_case("Upsample nearest", mk<nn::Upsample>(V{}, D{2.0}), {1, 1, 2, 3});
  run_case("Upsample bilinear", mk<nn::Upsample>(V{3, 5}, D{}, std::string("bilinear")),
           {1, 1, 2, 3});
  run_case("Upsample bilinear ac",
           mk<nn::Upsample>(V{}, D{2.0}, std::string("bilinear"), std::optional<bool>(true)),
           {1, 1, 2, 3});
  run_case("Upsample nearest 1d size", mk<nn::Upsample>(V{5}), {1, 2, 3});
  run_case("Upsample nearest-exact", mk<nn::Upsample>(V{}, D{1.5}, std::string("nearest-exact")),
           {1, 1, 2, 4});
  run_case("Upsample linear", mk<nn::Upsample>(V{}, D{2.5}, std::string("linear")), {1, 2, 3});
  run_case("Upsample bicubic", mk<nn::Upsample>(V{4, 5}, D{}, std::string("bicubic")),
           {1, 1, 3, 3});
  run_case("Upsample bicubic ac",
           mk<nn::Upsample>(V{}, D{2.0}, std::string("bicubic"), std::optional<bool>(true)),
           {1, 1, 2, 3});
  run_case("Upsample trilinear", mk<nn::Upsample>(V{}, D{2.0}, std::string("trilinear")),
           {1, 1, 2, 2, 2});
  run_case("Upsample nearest 3d", mk<nn::Upsample>(V{}, D{1, 2, 3}), {1, 1, 2, 2, 2});
  run_case("MaxPool2d unbatched", mk<nn::MaxPool2d>(V{2}), {2, 4, 4});
  run_case("AvgPool1d unbatched", mk<nn::AvgPool1d>(V{2}), {2, 6});
  run_case("AdaptiveAvgPool2d unbatched", mk<nn::AdaptiveAvgPool2d>(V{3, 2}), {2, 5, 4});
  run_case("GroupNorm 2d", mk<nn::GroupNorm>(2, 4, 1e-5, true, f64), {3, 4});
  run_case("BatchNorm2d eval first", mk<nn::BatchNorm2d>(2, 1e-5, O(0.1), true, true, f64),
           {2, 2, 2, 2}, "et");
  run_case("Softplus", mk<nn::Softplus>(2.0, 1.5), {3, 4}, "t", 2);
  run_case("ELU", mk<nn::ELU>(0.7), {3, 4}, "t", 2);
  run_case("CELU", mk<nn::CELU>(1.7), {3, 4}, "t", 2);
  run_case("LeakyReLU", mk<nn::LeakyReLU>(0.2), {3, 4}, "t", 2);
  run_case("ReLU6", mk<nn::ReLU6>(), {3, 4}, "t", 2, -4, 1.3);
  run_case("GLU", mk<nn::GLU>(), {3, 4}, "t", 2);
  run_case("GLU 0", mk<nn::GLU>(int64_t{0}), {4, 3}, "t", 2);
  run_case("Softmin", mk<nn::Softmin>(int64_t{1}), {3, 4}, "t", 2);
  run_case("GELU tanh", mk<nn::GELU>(std::string("tanh")), {3, 4}, "t", 2);
  run_case("Dropout eval", mk<nn::Dropout>(0.3), {3, 4}, "e");
  run_case("Flatten", mk<nn::Flatten>(), {2, 3, 2});

  const Tensor tgt = det({3, 4}, 4, -0.5, 0.3);
  const Tensor prob = dt::sigmoid(tgt);
  const Tensor cls = dt::from_vector(std::vector<int64_t>{1, 0, 3}, {3});
  using R = dt::Reduction;
  const std::pair<const char*, R> reds[] = {
      {"mean", R::kMean}, {"sum", R::kSum}, {"none", R::kNone}};
  auto L = [](auto m) { return [m](DTensor a, DTensor b) { return (*m)(a, b); }; };
  for (auto [rn, red] : reds) {
    const std::string r = rn;
    loss_case("MSELoss " + r, L(std::make_shared<nn::MSELoss>(red)), {3, 4}, tgt);
    loss_case("L1Loss " + r, L(std::make_shared<nn::L1Loss>(red)), {3, 4}, tgt);
    loss_case("SmoothL1Loss b0.5 " + r, L(std::make_shared<nn::SmoothL1Loss>(red, 0.5)), {3, 4},
              tgt);
    loss_case("HuberLoss d0.7 " + r, L(std::make_shared<nn::HuberLoss>(red, 0.7)), {3, 4}, tgt);
    loss_case("BCEWithLogitsLoss " + r, L(std::make_shared<nn::BCEWithLogitsLoss>(DTensor(), red)),
              {3, 4}, prob);
    loss_case("BCEWithLogitsLoss posw " + r,
              L(std::make_shared<nn::BCEWithLogitsLoss>(DTensor(), red, vec({1, 2, 0.5, 3}))),
              {3, 4}, prob);
    loss_case("CrossEntropyLoss " + r, L(std::make_shared<nn::CrossEntropyLoss>(-100, red)), {3, 4},
              cls);
    loss_case("CrossEntropyLoss ls w ign " + r,
              L(std::make_shared<nn::CrossEntropyLoss>(vec({1, 2, 0.5, 1.5}), 0, red, 0.2)), {3, 4},
              cls);
    loss_case("NLLLoss w " + r, L(std::make_shared<nn::NLLLoss>(vec({1, 2, 0.5, 1.5}), -100, red)),
              {3, 4}, cls);
  }
  const std::pair<const char*, R> kreds[] = {
      {"mean", R::kMean}, {"sum", R::kSum}, {"batchmean", R::kBatchMean}};
  for (auto [rn, red] : kreds) {
    const std::string r = rn;
    loss_case("KLDivLoss " + r, L(std::make_shared<nn::KLDivLoss>(red)), {3, 4}, prob);
    loss_case("KLDivLoss logt " + r, L(std::make_shared<nn::KLDivLoss>(red, true)), {3, 4}, tgt);
  }
  for (auto [rn, red] : reds) {  // BCELoss takes probabilities: the input goes through sigmoid
    auto m = std::make_shared<nn::BCELoss>(vec({1, 2, 0.5, 3}), red);
    loss_case(
        std::string("BCELoss w sigmoid ") + rn,
        [m](DTensor a, DTensor b) { return (*m)(dt::sigmoid(a), b); }, {3, 4}, prob);
  }
  loss_case("CosineSimilarity", L(std::make_shared<nn::CosineSimilarity>(1)), {3, 4}, tgt);
  loss_case("CosineSimilarity 0 eps", L(std::make_shared<nn::CosineSimilarity>(0, 0.5)), {3, 4},
            dt::mul(tgt, dt::Scalar(0.01)));
  loss_case("PairwiseDistance", L(std::make_shared<nn::PairwiseDistance>()), {3, 4}, tgt);
  loss_case("PairwiseDistance p1 keep", L(std::make_shared<nn::PairwiseDistance>(1.0, 0.1, true)),
            {3, 4}, tgt);
  write("dt_nn.json");
  return 0;
}
