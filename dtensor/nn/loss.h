// Loss modules with PyTorch's names and constructor arguments (the deprecated size_average /
// reduce left out): each holds its options and calls the DTensor loss of dtensor/ops/loss/loss.h,
// so a loss over sharded inputs keeps their layout and reduces without gathering them (see loss.h
// for the placements each reduction gives). Their forward takes (input, target); the
// single-input forward and hooks of Module do not apply (Module's forward(x) throws).
//
// Class weights (NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss's weight and
// pos_weight) are held as given, not as parameters (PyTorch registers them as buffers): a local
// DTensor (nn::local_dtensor) is taken as Replicate on the input's mesh at each call, a DTensor
// on the input's mesh is used as it is.
#pragma once

#include <cstdint>

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

}  // namespace dtensor::nn
