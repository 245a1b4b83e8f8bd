#include "dtensor/nn/loss.h"

#include "dtensor/nn/functional.h"

namespace dtensor::nn {

namespace {

// A class weight on the input's mesh (a local one taken as Replicate there).
DTensor weight_on(const DTensor& w, const DTensor& input, std::string_view op,
                  std::string_view what) {
  return input.defined() ? functional::on_mesh(w, input.device_mesh(), op, what) : w;
}

}  // namespace

DTensor MSELoss::forward(const DTensor& input, const DTensor& target) {
  return mse_loss(input, target, reduction_);
}

DTensor L1Loss::forward(const DTensor& input, const DTensor& target) {
  return l1_loss(input, target, reduction_);
}

DTensor SmoothL1Loss::forward(const DTensor& input, const DTensor& target) {
  return smooth_l1_loss(input, target, reduction_, beta_);
}

DTensor HuberLoss::forward(const DTensor& input, const DTensor& target) {
  return huber_loss(input, target, reduction_, delta_);
}

DTensor BCELoss::forward(const DTensor& input, const DTensor& target) {
  return binary_cross_entropy(input, target, reduction_,
                              weight_on(weight_, input, "BCELoss", "weight"));
}

DTensor BCEWithLogitsLoss::forward(const DTensor& input, const DTensor& target) {
  return binary_cross_entropy_with_logits(
      input, target, reduction_, weight_on(weight_, input, "BCEWithLogitsLoss", "weight"),
      weight_on(pos_weight_, input, "BCEWithLogitsLoss", "pos_weight"));
}

DTensor KLDivLoss::forward(const DTensor& input, const DTensor& target) {
  return kl_div(input, target, reduction_, log_target_);
}

DTensor NLLLoss::forward(const DTensor& input, const DTensor& target) {
  return nll_loss(input, target, reduction_, ignore_index_,
                  weight_on(weight_, input, "NLLLoss", "weight"));
}

DTensor CrossEntropyLoss::forward(const DTensor& input, const DTensor& target) {
  return cross_entropy(input, target, reduction_, ignore_index_, label_smoothing_,
                       weight_on(weight_, input, "CrossEntropyLoss", "weight"));
}

}  // namespace dtensor::nn
