// Distance modules with torch.nn's names, arguments and defaults: no parameters; forward(x1, x2)
// calls the DTensor op of dtensor/ops/distance/distance.h (the single-input forward of Module
// throws).
#pragma once

#include <cstdint>

#include "dtensor/nn/two_input_module.h"
#include "dtensor/ops/distance/distance.h"

namespace dtensor::nn {

// cosine_similarity(x1, x2, dim, eps).
class CosineSimilarity : public TwoInputModule {
 public:
  explicit CosineSimilarity(int64_t dim = 1, double eps = 1e-8) : dim_(dim), eps_(eps) {}
  std::string type_name() const override { return "CosineSimilarity"; }
  std::array<std::string_view, 2> input_names() const override { return {"x1", "x2"}; }
  DTensor forward(const DTensor& x1, const DTensor& x2) override;
  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }

 private:
  int64_t dim_;
  double eps_;
};

// pairwise_distance(x1, x2, p, eps, keepdim).
class PairwiseDistance : public TwoInputModule {
 public:
  explicit PairwiseDistance(double p = 2.0, double eps = 1e-6, bool keepdim = false)
      : p_(p), eps_(eps), keepdim_(keepdim) {}
  std::string type_name() const override { return "PairwiseDistance"; }
  std::array<std::string_view, 2> input_names() const override { return {"x1", "x2"}; }
  DTensor forward(const DTensor& x1, const DTensor& x2) override;
  double norm() const { return p_; }
  double eps() const { return eps_; }
  bool keepdim() const { return keepdim_; }

 private:
  double p_;
  double eps_;
  bool keepdim_;
};

}  // namespace dtensor::nn
