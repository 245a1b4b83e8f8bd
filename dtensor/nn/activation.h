// Activation modules with torch.nn's names, arguments and defaults. They hold no parameters;
// forward calls the DTensor op (dtensor/ops/elementwise/elementwise.h,
// dtensor/ops/softmax/softmax.h), so a sharded input keeps its shards as the op's strategy allows.
// PyTorch's `inplace` flags are not offered: the ops return new tensors.
#pragma once

#include <cstdint>
#include <string>

#include "dtensor/nn/module.h"
#include "dtensor/rng/generator.h"

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

// ---- Round 9 (helper INV): torch.nn's remaining simple activations. Each forward is one
// DTensor op or an exact composite of elementwise ops (where / comparisons / arithmetic), with
// PyTorch's gradient at the kinks (the values at a boundary take the constant's side, so their
// gradient is 0 as PyTorch's kernels give).

// hardtanh(x, min_val, max_val) = clamp(x, min_val, max_val); gradient 1 strictly inside.
// max_val <= min_val raises "[Hardtanh] max_val (0) must be greater than min_val (1)".
class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0);
  std::string type_name() const override { return "Hardtanh"; }
  DTensor forward(const DTensor& x) override;
  double min_val() const { return min_val_; }
  double max_val() const { return max_val_; }

 private:
  double min_val_;
  double max_val_;
};

// hardswish(x) = x relu6(x + 3) / 6.
class Hardswish : public Module {
 public:
  Hardswish() = default;
  std::string type_name() const override { return "Hardswish"; }
  DTensor forward(const DTensor& x) override;
};

// hardsigmoid(x) = relu6(x + 3) / 6.
class Hardsigmoid : public Module {
 public:
  Hardsigmoid() = default;
  std::string type_name() const override { return "Hardsigmoid"; }
  DTensor forward(const DTensor& x) override;
};

// mish(x) = x tanh(softplus(x)).
class Mish : public Module {
 public:
  Mish() = default;
  std::string type_name() const override { return "Mish"; }
  DTensor forward(const DTensor& x) override;
};

// selu(x) = scale elu(x, alpha) with PyTorch's constants.
class SELU : public Module {
 public:
  SELU() = default;
  std::string type_name() const override { return "SELU"; }
  DTensor forward(const DTensor& x) override;
};

// logsigmoid(x) = log(sigmoid(x)) = -softplus(-x).
class LogSigmoid : public Module {
 public:
  LogSigmoid() = default;
  std::string type_name() const override { return "LogSigmoid"; }
  DTensor forward(const DTensor& x) override;
};

// softsign(x) = x / (1 + |x|) (PyTorch's composite, same autograd).
class Softsign : public Module {
 public:
  Softsign() = default;
  std::string type_name() const override { return "Softsign"; }
  DTensor forward(const DTensor& x) override;
};

// tanhshrink(x) = x - tanh(x).
class Tanhshrink : public Module {
 public:
  Tanhshrink() = default;
  std::string type_name() const override { return "Tanhshrink"; }
  DTensor forward(const DTensor& x) override;
};

// threshold(x, threshold, value): x where x > threshold, else value (both required, as
// PyTorch's).
class Threshold : public Module {
 public:
  Threshold(double threshold, double value) : threshold_(threshold), value_(value) {}
  std::string type_name() const override { return "Threshold"; }
  DTensor forward(const DTensor& x) override;
  double threshold() const { return threshold_; }
  double value() const { return value_; }

 private:
  double threshold_;
  double value_;
};

// hardshrink(x, lambd): x where |x| > lambd, else 0.
class Hardshrink : public Module {
 public:
  explicit Hardshrink(double lambd = 0.5) : lambd_(lambd) {}
  std::string type_name() const override { return "Hardshrink"; }
  DTensor forward(const DTensor& x) override;
  double lambd() const { return lambd_; }

 private:
  double lambd_;
};

// softshrink(x, lambd): x - lambd where x > lambd, x + lambd where x < -lambd, else 0.
// lambd < 0 raises in forward, as PyTorch's: "[Softshrink] lambd must be >= 0, got -1".
class Softshrink : public Module {
 public:
  explicit Softshrink(double lambd = 0.5) : lambd_(lambd) {}
  std::string type_name() const override { return "Softshrink"; }
  DTensor forward(const DTensor& x) override;
  double lambd() const { return lambd_; }

 private:
  double lambd_;
};

// softmax over the channel dim (-3) of a (C, H, W) or (N, C, H, W) input; other ranks raise
// "[Softmax2d] expected input to be 3D or 4D, got 2D instead".
class Softmax2d : public Module {
 public:
  Softmax2d() = default;
  std::string type_name() const override { return "Softmax2d"; }
  DTensor forward(const DTensor& x) override;
};

// prelu(x, weight): x where x > 0, else weight x. Parameter "weight" [num_parameters], every
// value `init` (0.25). num_parameters > 1 is one slope per channel (dim 1, which must have that
// size: "[PReLU] Mismatch of parameter numbers and input channel size. Found parameter numbers
// = 3 and channel size = 4"); an input of rank < 2 has one channel.
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25, ModuleOptions opts = {});
  std::string type_name() const override { return "PReLU"; }
  DTensor forward(const DTensor& x) override;
  int64_t num_parameters() const { return num_parameters_; }

 protected:
  void reset_own_parameters(Generator* gen) override;

 private:
  int64_t num_parameters_;
  double init_;
};

// rrelu(x, lower, upper, training): x where x >= 0 (x > 0; at 0 both sides give 0). In eval
// mode the negative slope is (lower + upper) / 2, exactly PyTorch's. In training each element's
// slope is drawn uniform on [lower, upper) from dtensor's RNG (rand_like through `gen`, else the
// default tracker, as Dropout): the same distribution as PyTorch's, not PyTorch's draws; the
// gradient w.r.t. x is that slope where x <= 0. lower > upper raises at construction:
// "[RReLU] lower bound 0.5 should be less than or equal to the upper bound 0.2".
class RReLU : public Module {
 public:
  explicit RReLU(double lower = 1.0 / 8.0, double upper = 1.0 / 3.0, Generator* gen = nullptr);
  std::string type_name() const override { return "RReLU"; }
  DTensor forward(const DTensor& x) override;
  double lower() const { return lower_; }
  double upper() const { return upper_; }

 private:
  double lower_;
  double upper_;
  Generator* gen_;
};

}  // namespace dtensor::nn
