// Helpers shared by the dtensor/parallel/ tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "dtensor/nn/functional.h"
#include "dtensor/nn/module.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::test {

// Largest absolute elementwise difference (infinity when the shapes differ).
inline double max_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  const auto x = a.to(kFloat64).to_vector<double>();
  const auto y = b.to(kFloat64).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// A Linear without bias whose weight is another module's (tied, tie_parameter).
class TiedLinear : public nn::Module {
 public:
  explicit TiedLinear(const DTensor& w) { tie_parameter("weight", w); }
  std::string type_name() const override { return "TiedLinear"; }
  DTensor forward(const DTensor& x) override {
    return linear(x, nn::functional::on_mesh(param("weight"), x.device_mesh()));
  }
};

}  // namespace dtensor::test
