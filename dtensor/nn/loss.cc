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

DTensor MarginRankingLoss::forward(const DTensor& input1, const DTensor& input2,
                                   const DTensor& target) {
  return margin_ranking_loss(input1, input2, target, reduction_, margin_);
}

DTensor HingeEmbeddingLoss::forward(const DTensor& input, const DTensor& target) {
  return hinge_embedding_loss(input, target, reduction_, margin_);
}

DTensor CosineEmbeddingLoss::forward(const DTensor& input1, const DTensor& input2,
                                     const DTensor& target) {
  return cosine_embedding_loss(input1, input2, target, reduction_, margin_);
}

DTensor SoftMarginLoss::forward(const DTensor& input, const DTensor& target) {
  return soft_margin_loss(input, target, reduction_);
}

DTensor MultiLabelSoftMarginLoss::forward(const DTensor& input, const DTensor& target) {
  return multilabel_soft_margin_loss(
      input, target, reduction_, weight_on(weight_, input, "MultiLabelSoftMarginLoss", "weight"));
}

DTensor MultiMarginLoss::forward(const DTensor& input, const DTensor& target) {
  return multi_margin_loss(input, target, reduction_, p_, margin_,
                           weight_on(weight_, input, "MultiMarginLoss", "weight"));
}

DTensor MultiLabelMarginLoss::forward(const DTensor& input, const DTensor& target) {
  return multilabel_margin_loss(input, target, reduction_);
}

DTensor TripletMarginLoss::forward(const DTensor& anchor, const DTensor& positive,
                                   const DTensor& negative) {
  return triplet_margin_loss(anchor, positive, negative, reduction_, margin_, p_, eps_, swap_);
}

DTensor TripletMarginWithDistanceLoss::forward(const DTensor& anchor, const DTensor& positive,
                                               const DTensor& negative) {
  return triplet_margin_with_distance_loss(anchor, positive, negative, reduction_,
                                           distance_function_, margin_, swap_);
}

DTensor PoissonNLLLoss::forward(const DTensor& input, const DTensor& target) {
  return poisson_nll_loss(input, target, reduction_, log_input_, full_, eps_);
}

DTensor GaussianNLLLoss::forward(const DTensor& input, const DTensor& target, const DTensor& var) {
  return gaussian_nll_loss(input, target, var, reduction_, full_, eps_);
}

}  // namespace dtensor::nn
