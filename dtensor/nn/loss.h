// Loss modules with PyTorch's names and constructor arguments (the deprecated size_average /
// reduce left out): each holds its options and calls the DTensor loss of dtensor/ops/loss/loss.h,
// so a loss over sharded inputs keeps their layout and reduces without gathering them (see loss.h
// for the placements each reduction gives). Their forward takes (input, target), or three
// DTensors for the ThreeInputLoss ones (MarginRankingLoss, CosineEmbeddingLoss, TripletMarginLoss,
// TripletMarginWithDistanceLoss, GaussianNLLLoss); a call runs the module's hooks (their args
// forms), and Module's single-input forward throws.
//
// Class weights (NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss's weight and
// pos_weight, MultiLabelSoftMarginLoss, MultiMarginLoss) are held as given, not as parameters
// (PyTorch registers them as buffers): a local DTensor (nn::local_dtensor) is taken as Replicate on
// the input's mesh at each call, a DTensor on the input's mesh is used as it is.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/nn/two_input_module.h"
#include "dtensor/ops/loss/loss.h"

namespace dtensor::nn {

using ::dtensor::Reduction;

// The base of the loss modules (PyTorch's _Loss): the reduction and a two-input forward
// (input, target).
class Loss : public TwoInputModule {
 public:
  explicit Loss(Reduction reduction) : reduction_(reduction) {}
  Reduction reduction() const { return reduction_; }

 protected:
  Reduction reduction_;
};

// The base of the three-input losses (MarginRankingLoss, CosineEmbeddingLoss, TripletMarginLoss,
// TripletMarginWithDistanceLoss, GaussianNLLLoss): module(a, b, c) runs forward(a, b, c) (in
// PyTorch's order, input_names()) through the module's hooks, as TwoInputModule's call: the
// args forms see (a, b, c), the one-input forms are refused at registration. Module's
// single-input forward and call stay visible and throw.
class ThreeInputLoss : public MultiInputModule {
 public:
  explicit ThreeInputLoss(Reduction reduction) : reduction_(reduction) {}
  Reduction reduction() const { return reduction_; }
  using Module::forward;
  virtual DTensor forward(const DTensor& a, const DTensor& b, const DTensor& c) = 0;
  using Module::operator();
  DTensor operator()(const DTensor& a, const DTensor& b, const DTensor& c) {
    if (!has_hooks()) return forward(a, b, c);
    const DTensor args[] = {a, b, c};
    return call_with_hooks(
        args, [this](absl::Span<const DTensor> in) { return forward(in[0], in[1], in[2]); });
  }
  // The inputs' names, as PyTorch's forward names them.
  virtual std::array<std::string_view, 3> input_names() const = 0;
  std::vector<std::string_view> input_name_list() const final {
    const auto names = input_names();
    return {names.begin(), names.end()};
  }

 protected:
  Reduction reduction_;
};

// mse_loss: (input - target)^2.
class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::kMean) : Loss(reduction) {}
  std::string type_name() const override { return "MSELoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
};

// l1_loss: |input - target|.
class L1Loss : public Loss {
 public:
  explicit L1Loss(Reduction reduction = Reduction::kMean) : Loss(reduction) {}
  std::string type_name() const override { return "L1Loss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
};

// smooth_l1_loss with `beta` (>= 0).
class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(Reduction reduction = Reduction::kMean, double beta = 1.0)
      : Loss(reduction), beta_(beta) {}
  std::string type_name() const override { return "SmoothL1Loss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;

 private:
  double beta_;
};

// huber_loss with `delta` (> 0).
class HuberLoss : public Loss {
 public:
  explicit HuberLoss(Reduction reduction = Reduction::kMean, double delta = 1.0)
      : Loss(reduction), delta_(delta) {}
  std::string type_name() const override { return "HuberLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;

 private:
  double delta_;
};

// binary_cross_entropy of probabilities, with an optional `weight` broadcast to the input.
class BCELoss : public Loss {
 public:
  explicit BCELoss(DTensor weight = DTensor(), Reduction reduction = Reduction::kMean)
      : Loss(reduction), weight_(std::move(weight)) {}
  std::string type_name() const override { return "BCELoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
  const DTensor& weight() const { return weight_; }

 private:
  DTensor weight_;
};

// binary_cross_entropy_with_logits, with optional `weight` and `pos_weight` (usually [C]).
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(DTensor weight = DTensor(), Reduction reduction = Reduction::kMean,
                             DTensor pos_weight = DTensor())
      : Loss(reduction), weight_(std::move(weight)), pos_weight_(std::move(pos_weight)) {}
  std::string type_name() const override { return "BCEWithLogitsLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
  const DTensor& weight() const { return weight_; }
  const DTensor& pos_weight() const { return pos_weight_; }

 private:
  DTensor weight_;
  DTensor pos_weight_;
};

// kl_div of log-probabilities; Reduction::kBatchMean is the KL divergence's definition.
class KLDivLoss : public Loss {
 public:
  explicit KLDivLoss(Reduction reduction = Reduction::kMean, bool log_target = false)
      : Loss(reduction), log_target_(log_target) {}
  std::string type_name() const override { return "KLDivLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;

 private:
  bool log_target_;
};

// nll_loss of log-probabilities and class-index targets, optional class `weight` [C].
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(DTensor weight = DTensor(), int64_t ignore_index = -100,
                   Reduction reduction = Reduction::kMean)
      : Loss(reduction), weight_(std::move(weight)), ignore_index_(ignore_index) {}
  std::string type_name() const override { return "NLLLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
  const DTensor& weight() const { return weight_; }

 private:
  DTensor weight_;
  int64_t ignore_index_;
};

// cross_entropy of logits and class-index or class-probability targets (a target of the
// input's shape), with an optional class `weight` [C] (PyTorch's argument order: weight,
// ignore_index, reduction, label_smoothing; the first constructor leaves the weight out).
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100, Reduction reduction = Reduction::kMean,
                            double label_smoothing = 0.0)
      : CrossEntropyLoss(DTensor(), ignore_index, reduction, label_smoothing) {}
  explicit CrossEntropyLoss(DTensor weight, int64_t ignore_index = -100,
                            Reduction reduction = Reduction::kMean, double label_smoothing = 0.0)
      : Loss(reduction),
        weight_(std::move(weight)),
        ignore_index_(ignore_index),
        label_smoothing_(label_smoothing) {}
  std::string type_name() const override { return "CrossEntropyLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
  const DTensor& weight() const { return weight_; }

 private:
  DTensor weight_;
  int64_t ignore_index_;
  double label_smoothing_;
};

// ---- The margin, embedding and likelihood losses (dtensor/ops/loss/loss.h) ---------------

// margin_ranking_loss: max(0, -target (input1 - input2) + margin).
class MarginRankingLoss : public ThreeInputLoss {
 public:
  explicit MarginRankingLoss(double margin = 0.0, Reduction reduction = Reduction::kMean)
      : ThreeInputLoss(reduction), margin_(margin) {}
  std::string type_name() const override { return "MarginRankingLoss"; }
  std::array<std::string_view, 3> input_names() const override {
    return {"input1", "input2", "target"};
  }
  DTensor forward(const DTensor& input1, const DTensor& input2, const DTensor& target) override;

 private:
  double margin_;
};

// hinge_embedding_loss with `margin`.
class HingeEmbeddingLoss : public Loss {
 public:
  explicit HingeEmbeddingLoss(double margin = 1.0, Reduction reduction = Reduction::kMean)
      : Loss(reduction), margin_(margin) {}
  std::string type_name() const override { return "HingeEmbeddingLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;

 private:
  double margin_;
};

// cosine_embedding_loss with `margin`.
class CosineEmbeddingLoss : public ThreeInputLoss {
 public:
  explicit CosineEmbeddingLoss(double margin = 0.0, Reduction reduction = Reduction::kMean)
      : ThreeInputLoss(reduction), margin_(margin) {}
  std::string type_name() const override { return "CosineEmbeddingLoss"; }
  std::array<std::string_view, 3> input_names() const override {
    return {"input1", "input2", "target"};
  }
  DTensor forward(const DTensor& input1, const DTensor& input2, const DTensor& target) override;

 private:
  double margin_;
};

// soft_margin_loss: log(1 + exp(-target input)).
class SoftMarginLoss : public Loss {
 public:
  explicit SoftMarginLoss(Reduction reduction = Reduction::kMean) : Loss(reduction) {}
  std::string type_name() const override { return "SoftMarginLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
};

// multilabel_soft_margin_loss with an optional class `weight` (held as BCELoss' weight).
class MultiLabelSoftMarginLoss : public Loss {
 public:
  explicit MultiLabelSoftMarginLoss(DTensor weight = DTensor(),
                                    Reduction reduction = Reduction::kMean)
      : Loss(reduction), weight_(std::move(weight)) {}
  std::string type_name() const override { return "MultiLabelSoftMarginLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
  const DTensor& weight() const { return weight_; }

 private:
  DTensor weight_;
};

// multi_margin_loss with `p` (1 or 2), `margin` and an optional class `weight` [C].
class MultiMarginLoss : public Loss {
 public:
  explicit MultiMarginLoss(int64_t p = 1, double margin = 1.0, DTensor weight = DTensor(),
                           Reduction reduction = Reduction::kMean)
      : Loss(reduction), p_(p), margin_(margin), weight_(std::move(weight)) {}
  std::string type_name() const override { return "MultiMarginLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
  const DTensor& weight() const { return weight_; }

 private:
  int64_t p_;
  double margin_;
  DTensor weight_;
};

// multilabel_margin_loss of class-index lists ended by -1.
class MultiLabelMarginLoss : public Loss {
 public:
  explicit MultiLabelMarginLoss(Reduction reduction = Reduction::kMean) : Loss(reduction) {}
  std::string type_name() const override { return "MultiLabelMarginLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;
};

// triplet_margin_loss with `margin`, `p`, `eps` and `swap`.
class TripletMarginLoss : public ThreeInputLoss {
 public:
  explicit TripletMarginLoss(double margin = 1.0, double p = 2.0, double eps = 1e-6,
                             bool swap = false, Reduction reduction = Reduction::kMean)
      : ThreeInputLoss(reduction), margin_(margin), p_(p), eps_(eps), swap_(swap) {}
  std::string type_name() const override { return "TripletMarginLoss"; }
  std::array<std::string_view, 3> input_names() const override {
    return {"anchor", "positive", "negative"};
  }
  DTensor forward(const DTensor& anchor, const DTensor& positive, const DTensor& negative) override;

 private:
  double margin_, p_, eps_;
  bool swap_;
};

// triplet_margin_with_distance_loss with a `distance_function` (empty: pairwise_distance),
// `margin` and `swap` (PyTorch's keyword-only arguments, in their order).
class TripletMarginWithDistanceLoss : public ThreeInputLoss {
 public:
  explicit TripletMarginWithDistanceLoss(DTensorDistance distance_function = {},
                                         double margin = 1.0, bool swap = false,
                                         Reduction reduction = Reduction::kMean)
      : ThreeInputLoss(reduction),
        distance_function_(std::move(distance_function)),
        margin_(margin),
        swap_(swap) {}
  std::string type_name() const override { return "TripletMarginWithDistanceLoss"; }
  std::array<std::string_view, 3> input_names() const override {
    return {"anchor", "positive", "negative"};
  }
  DTensor forward(const DTensor& anchor, const DTensor& positive, const DTensor& negative) override;

 private:
  DTensorDistance distance_function_;
  double margin_;
  bool swap_;
};

// poisson_nll_loss with `log_input`, `full` and `eps` (PyTorch's order: log_input, full, eps,
// reduction).
class PoissonNLLLoss : public Loss {
 public:
  explicit PoissonNLLLoss(bool log_input = true, bool full = false, double eps = 1e-8,
                          Reduction reduction = Reduction::kMean)
      : Loss(reduction), log_input_(log_input), full_(full), eps_(eps) {}
  std::string type_name() const override { return "PoissonNLLLoss"; }
  DTensor forward(const DTensor& input, const DTensor& target) override;

 private:
  bool log_input_, full_;
  double eps_;
};

// gaussian_nll_loss with `full` and `eps`; forward(input, target, var).
class GaussianNLLLoss : public ThreeInputLoss {
 public:
  explicit GaussianNLLLoss(bool full = false, double eps = 1e-6,
                           Reduction reduction = Reduction::kMean)
      : ThreeInputLoss(reduction), full_(full), eps_(eps) {}
  std::string type_name() const override { return "GaussianNLLLoss"; }
  std::array<std::string_view, 3> input_names() const override {
    return {"input", "target", "var"};
  }
  DTensor forward(const DTensor& input, const DTensor& target, const DTensor& var) override;

 private:
  bool full_;
  double eps_;
};

}  // namespace dtensor::nn
