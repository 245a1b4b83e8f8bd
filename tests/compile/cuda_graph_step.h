// The small model of the CUDA-graph tests of a compiled step (CompileOptions::cuda_graph):
// Linear -> LayerNorm -> GELU -> Linear, cross_entropy (or the same from device-side ops:
// onehot_cross_entropy), AdamW, SGD with momentum, Adam, RMSprop or Adagrad, optionally
// clip_grad_norm_, a StepLR schedule changing the learning rate every 3 steps. Local modules on
// one device (tests/compile/test_compile_cuda_graph_mpi.cc on the CPU,
// tests/gpu/test_compile_cuda_graph.cc on CUDA); two built alike train identically.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dtensor/dtensor.h"

namespace dtensor::cuda_graph_test {

class Net : public nn::Module {
 public:
  Net(int64_t in, int64_t hidden, int64_t classes, nn::ModuleOptions o) {
    fc1_ = std::make_shared<nn::Linear>(in, hidden, true, o);
    ln_ = std::make_shared<nn::LayerNorm>(hidden, 1e-5, true, o);
    fc2_ = std::make_shared<nn::Linear>(hidden, classes, true, o);
    register_module("fc1", fc1_);
    register_module("ln", ln_);
    register_module("fc2", fc2_);
  }
  std::string type_name() const override { return "CudaGraphNet"; }
  DTensor forward(const DTensor& x) override { return (*fc2_)(gelu((*ln_)((*fc1_)(x)))); }

 private:
  std::shared_ptr<nn::Linear> fc1_, fc2_;
  std::shared_ptr<nn::LayerNorm> ln_;
};

inline constexpr int64_t kIn = 16, kHidden = 32, kClasses = 10, kBatch = 8;

// Cross-entropy from device-side ops only (log_softmax, a product with one-hot targets, sum,
// mean): dtensor::cross_entropy's CUDA path reads its loss sum on the host
// (dtensor/ops/loss/nll_loss_strategy.cc), which a CUDA graph cannot capture.
inline DTensor onehot_cross_entropy(const DTensor& logits, const DTensor& onehot) {
  const int64_t classes[] = {-1};
  return neg(mean(sum(mul(log_softmax(logits, -1), onehot), classes)));
}

struct Trainer {
  Device device;
  Net net;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::StepLR> schedule;
  bool clip;
  bool onehot_loss;  // onehot_cross_entropy on the batch's one-hot targets, else cross_entropy

  Trainer(Device dev, bool adamw, bool clip_norm, bool onehot = false)
      : Trainer(dev, adamw ? "AdamW" : "SGD", clip_norm, onehot) {}
  // `kind`: "AdamW", "SGD" (momentum), "Adam" (L2, amsgrad), "RMSprop" (centered, momentum) or
  // "Adagrad" (lr_decay).
  Trainer(Device dev, const char* kind, bool clip_norm, bool onehot = false)
      : device(dev),
        net((manual_seed(5), kIn), kHidden, kClasses, nn::ModuleOptions{.device = dev}),
        clip(clip_norm),
        onehot_loss(onehot) {
    const std::string k = kind;
    const auto params = net.parameters();
    if (k == "AdamW") {
      opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions(1e-2).weight_decay(1e-2));
    } else if (k == "SGD") {
      opt = std::make_unique<optim::SGD>(params,
                                         optim::SGDOptions(5e-2).momentum(0.9).weight_decay(1e-3));
    } else if (k == "Adam") {
      opt = std::make_unique<optim::Adam>(
          params, optim::AdamOptions(1e-2).weight_decay(1e-2).amsgrad(true));
    } else if (k == "RMSprop") {
      opt = std::make_unique<optim::RMSprop>(
          params, optim::RMSpropOptions(1e-3).centered(true).momentum(0.5));
    } else {
      opt = std::make_unique<optim::Adagrad>(params, optim::AdagradOptions(5e-2).lr_decay(0.1));
    }
    schedule = std::make_unique<optim::StepLR>(*opt, 3, 0.5);
  }

  // One step: zero_grad, forward, loss, backward, (clip), update; returns the loss.
  DTensorList step(const DTensorList& batch) {
    opt->zero_grad();
    const DTensor logits = net(batch[0]);
    const DTensor loss =
        onehot_loss ? onehot_cross_entropy(logits, batch[2]) : cross_entropy(logits, batch[1]);
    loss.backward();
    if (clip) optim::clip_grad_norm_(opt->parameters(), 0.5);
    opt->step();
    return {loss.detach()};
  }
};

// Batch i (rows = kBatch unless given) on `dev`, as local DTensors: inputs, class targets and
// the same targets one-hot (float).
inline DTensorList make_batch(Device dev, int i, int64_t rows = kBatch) {
  Generator g(1000 + i);
  const Tensor x = randn({rows, kIn}, {}, &g);
  const Tensor y = randint(0, kClasses, {rows}, TensorOptions(kInt64), &g);
  Tensor onehot = zeros({rows, kClasses});
  for (int64_t r = 0; r < rows; ++r) onehot.data<float>()[r * kClasses + y.data<int64_t>()[r]] = 1;
  return {local_dtensor(x.to(dev)), local_dtensor(y.to(dev)), local_dtensor(onehot.to(dev))};
}

// Bit equality of two modules' parameters.
inline bool same_parameters(const nn::Module& a, const nn::Module& b, std::string* first_diff) {
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (!equal(pa[i].second.to_local().to(Device(kCPU)),
               pb[i].second.to_local().to(Device(kCPU)))) {
      if (first_diff != nullptr) *first_diff = pa[i].first;
      return false;
    }
  }
  return true;
}

inline Tensor on_cpu(const DTensor& t) {
  return t.to_local().to(Device(kCPU));
}

}  // namespace dtensor::cuda_graph_test
