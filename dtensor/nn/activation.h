// Activation modules with torch.nn's names, arguments and defaults. They hold no parameters;
// forward calls the DTensor op (dtensor/ops/elementwise/elementwise.h,
// dtensor/ops/softmax/softmax.h), so a sharded input keeps its shards as the op's strategy allows.
// PyTorch's `inplace` flags are not offered: the ops return new tensors.
#pragma once

#include <cstdint>

#include "dtensor/nn/module.h"

namespace dtensor::nn {

// softplus(x, beta, threshold): log(1 + exp(beta x)) / beta, x where beta x > threshold.
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0)
      : beta_(beta), threshold_(threshold) {}
  std::string type_name() const override { return "Softplus"; }
  DTensor forward(const DTensor& x) override;
  double beta() const { return beta_; }
  double threshold() const { return threshold_; }

 private:
  double beta_;
  double threshold_;
};

// elu(x, alpha): x for x > 0, alpha (exp(x) - 1) otherwise.
class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : alpha_(alpha) {}
  std::string type_name() const override { return "ELU"; }
  DTensor forward(const DTensor& x) override;
  double alpha() const { return alpha_; }

 private:
  double alpha_;
};

// celu(x, alpha): max(0, x) + min(0, alpha (exp(x / alpha) - 1)); alpha 0 raises in forward,
// as PyTorch's.
class CELU : public Module {
 public:
  explicit CELU(double alpha = 1.0) : alpha_(alpha) {}
  std::string type_name() const override { return "CELU"; }
  DTensor forward(const DTensor& x) override;
  double alpha() const { return alpha_; }

 private:
  double alpha_;
};

// leaky_relu(x, negative_slope): x for x > 0, negative_slope x otherwise.
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope_(negative_slope) {}
  std::string type_name() const override { return "LeakyReLU"; }
  DTensor forward(const DTensor& x) override;
  double negative_slope() const { return negative_slope_; }

 private:
  double negative_slope_;
};

// relu6(x) = min(max(x, 0), 6).
class ReLU6 : public Module {
 public:
  ReLU6() = default;
  std::string type_name() const override { return "ReLU6"; }
  DTensor forward(const DTensor& x) override;
};

// glu(x, dim): a * sigmoid(b) of x's halves along dim (even size).
class GLU : public Module {
 public:
  explicit GLU(int64_t dim = -1) : dim_(dim) {}
  std::string type_name() const override { return "GLU"; }
  DTensor forward(const DTensor& x) override;
  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
};

// softmin(x, dim) = softmax(-x, dim). The dim is required (PyTorch's implicit choice for
// dim=None is deprecated there).
class Softmin : public Module {
 public:
  explicit Softmin(int64_t dim) : dim_(dim) {}
  std::string type_name() const override { return "Softmin"; }
  DTensor forward(const DTensor& x) override;
  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
};

}  // namespace dtensor::nn
