// Activation modules with torch.nn's names, arguments and defaults. They hold no parameters;
// forward calls the DTensor op (dtensor/ops/elementwise/elementwise.h,
// dtensor/ops/softmax/softmax.h), so a sharded input keeps its shards as the op's strategy allows.
// PyTorch's `inplace` flags are not offered: the ops return new tensors.
#pragma once

#include <cstdint>
#include <string>

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

// relu(x) = max(x, 0).
class ReLU : public Module {
 public:
  ReLU() = default;
  std::string type_name() const override { return "ReLU"; }
  DTensor forward(const DTensor& x) override;
};

// gelu(x, approximate): x Phi(x) ("none", the default) or PyTorch's tanh approximation
// ("tanh"); any other string raises "[GELU] approximate must be 'none' or 'tanh', got ...".
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  std::string type_name() const override { return "GELU"; }
  DTensor forward(const DTensor& x) override;
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};

// silu(x) = x sigmoid(x) (PyTorch's SiLU, also called swish).
class SiLU : public Module {
 public:
  SiLU() = default;
  std::string type_name() const override { return "SiLU"; }
  DTensor forward(const DTensor& x) override;
};

// tanh(x).
class Tanh : public Module {
 public:
  Tanh() = default;
  std::string type_name() const override { return "Tanh"; }
  DTensor forward(const DTensor& x) override;
};

// sigmoid(x) = 1 / (1 + exp(-x)).
class Sigmoid : public Module {
 public:
  Sigmoid() = default;
  std::string type_name() const override { return "Sigmoid"; }
  DTensor forward(const DTensor& x) override;
};

// softmax(x, dim). The dim is required (PyTorch's implicit choice for dim=None is deprecated
// there); an input sharded along it is gathered along it by the op (dtensor/ops/softmax).
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim_(dim) {}
  std::string type_name() const override { return "Softmax"; }
  DTensor forward(const DTensor& x) override;
  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
};

// log_softmax(x, dim); the dim is required, as for Softmax.
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim_(dim) {}
  std::string type_name() const override { return "LogSoftmax"; }
  DTensor forward(const DTensor& x) override;
  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
};

}  // namespace dtensor::nn
