// Learning-rate schedulers: PyTorch's torch.optim.lr_scheduler for dtensor's optimizers, with
// PyTorch's names, defaults and formulas (the recursive ones: each step scales the optimizer's
// current learning rate, so the sequence is PyTorch's to the last bit, not only in exact
// arithmetic). Call step() after the optimizer's step, as in PyTorch:
//
//   optim::AdamW opt(model.parameters(), optim::AdamWOptions(3e-4));
//   optim::LinearLR warmup(opt, /*start_factor=*/0.01, /*end_factor=*/1.0, /*total_iters=*/100);
//   ...   // per step: forward, backward, opt.step(); warmup.step();
//
// A compiled step (dtensor::compile) reads the optimizer's learning rate at every replay, so a
// scheduler stepped between replays changes the update as it does eagerly; call it outside the
// compiled function (inside, its C++ runs at the capture only). Schedulers are plain host
// state: every rank steps its own copy, with no communication.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/optim/optimizer.h"

namespace dtensor::optim {

// Base of the schedulers (PyTorch's LRScheduler). Constructing one takes its first step
// (epoch 0), which may already change the optimizer's learning rate (LinearLR, ConstantLR).
// The base learning rate is the optimizer's initial_lr, set to its current learning rate by
// the first scheduler attached to it.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances the schedule by one step and sets the optimizer's learning rate.
  virtual void step();
  // The learning rate set by the last step (or the constructor).
  double get_last_lr() const { return last_lr_; }
  // Steps taken (0 after the constructor).
  int64_t last_epoch() const { return last_epoch_; }
  double base_lr() const { return base_lr_; }
  Optimizer& optimizer() const { return *optimizer_; }

  // The schedule's position for a checkpoint: "last_epoch" (int64 [1]), "last_lr" and
  // "base_lr" (PyTorch's base_lrs; float64 [1]) as local DTensors (a SequentialLR or
  // ChainedScheduler adds "<k>.<entry>" for its k-th scheduler). The other hyper-parameters
  // (gamma, T_max, milestones, the lambda, ...) are the constructor's (PyTorch's state_dict
  // holds them and its load_state_dict overwrites them). load_state_dict takes the same entries
  // back (a state without "base_lr", saved before it was kept, keeps the constructor's) and
  // sets the optimizer's learning rate to last_lr, so a run resumed from a checkpoint continues
  // the schedule exactly. checkpoint::training_state(model, optimizer, scheduler, generator)
  // saves it as "lr_scheduler.<entry>" and load_training_state restores it.
  virtual std::vector<std::pair<std::string, DTensor>> state_dict() const;
  virtual void load_state_dict(const std::vector<std::pair<std::string, DTensor>>& state);

 protected:
  LRScheduler(Optimizer& optimizer, std::string name);
  // The first step (PyTorch's _initial_step): every subclass constructor ends with it.
  void initial_step();
  // The learning rate at last_epoch_, from the optimizer's current one (PyTorch's get_lr);
  // `initial` during initial_step.
  virtual double get_lr(bool initial) const = 0;
  // PyTorch's _get_closed_form_lr, where the scheduler has one: the learning rate at
  // last_epoch_ from base_lr alone.
  virtual std::optional<double> closed_form_lr() const { return std::nullopt; }
  // Moves to `epoch` directly (PyTorch's step(epoch), which SequentialLR uses to restart a
  // scheduler at 0 at its milestone): the closed form, or get_lr where there is none.
  virtual void restart_at(int64_t epoch);
  // Sets the optimizer's learning rate and last_lr.
  void set_lr(double lr);
  double current_lr() const { return optimizer_->lr(); }

  Optimizer* optimizer_;
  std::string name_;  // "LinearLR": the errors' op
  double base_lr_;
  int64_t last_epoch_ = -1;
  double last_lr_ = 0;
  // A SequentialLR's or ChainedScheduler's schedulers (owned; their state is this one's
  // "<k>.<entry>"); empty for the others.
  std::vector<std::unique_ptr<LRScheduler>> children_;

  friend class SequentialLR;
  friend class ChainedScheduler;
};

// lr = base_lr * lr_lambda(epoch).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);

 protected:
  double get_lr(bool initial) const override;

 private:
  std::function<double(int64_t)> lr_lambda_;
};

// lr = lr * lr_lambda(epoch) at every step after the first.
class MultiplicativeLR : public LRScheduler {
 public:
  MultiplicativeLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);

 protected:
  double get_lr(bool initial) const override;

 private:
  std::function<double(int64_t)> lr_lambda_;
};

// lr *= gamma every step_size steps (step_size > 0).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double get_lr(bool initial) const override;
  std::optional<double> closed_form_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr *= gamma at each milestone (a milestone listed n times scales by gamma^n).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  double get_lr(bool initial) const override;
  std::optional<double> closed_form_lr() const override;

 private:
  std::vector<int64_t> milestones_;  // sorted, repeats kept
  double gamma_;
};

// lr = base_lr * factor until total_iters steps, then base_lr (factor in [0, 1]).
class ConstantLR : public LRScheduler {
 public:
  explicit ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3, int64_t total_iters = 5);

 protected:
  double get_lr(bool initial) const override;
  std::optional<double> closed_form_lr() const override;

 private:
  double factor_;
  int64_t total_iters_;
};

// The factor of base_lr moves linearly from start_factor to end_factor over total_iters steps
// (start_factor in (0, 1], end_factor in [0, 1], total_iters > 0): warmup.
class LinearLR : public LRScheduler {
 public:
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    int64_t total_iters = 5);

 protected:
  double get_lr(bool initial) const override;
  std::optional<double> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// lr *= gamma every step.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  double get_lr(bool initial) const override;
  std::optional<double> closed_form_lr() const override;

 private:
  double gamma_;
};

// lr = base_lr * (1 - epoch / total_iters)^power up to total_iters (> 0), then unchanged.
class PolynomialLR : public LRScheduler {
 public:
  explicit PolynomialLR(Optimizer& optimizer, int64_t total_iters = 5, double power = 1.0);

 protected:
  double get_lr(bool initial) const override;
  std::optional<double> closed_form_lr() const override;

 private:
  int64_t total_iters_;
  double power_;
};

// lr = eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, by PyTorch's recursive
// form (which keeps following the cosine past T_max: it rises again); T_max > 0.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  double get_lr(bool initial) const override;
  std::optional<double> closed_form_lr() const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Runs schedulers[k] from milestones[k - 1] on (restarted at its epoch 0 there), e.g. a
// LinearLR warmup then a CosineAnnealingLR decay. Takes ownership of the schedulers, which must
// be built on `optimizer` (before this one, as in PyTorch) and be simple schedulers (not
// SequentialLR or ChainedScheduler); milestones: one fewer than schedulers.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::unique_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step() override;
  const std::vector<std::unique_ptr<LRScheduler>>& schedulers() const { return children_; }

 protected:
  double get_lr(bool initial) const override;
  void restart_at(int64_t epoch) override;

 private:
  std::vector<int64_t> milestones_;
};

// Steps every scheduler at each step (their factors compose); the learning rate is the
// optimizer's after the last. Takes ownership; all on `optimizer`.
class ChainedScheduler : public LRScheduler {
 public:
  ChainedScheduler(Optimizer& optimizer, std::vector<std::unique_ptr<LRScheduler>> schedulers);
  void step() override;
  const std::vector<std::unique_ptr<LRScheduler>>& schedulers() const { return children_; }

 protected:
  double get_lr(bool initial) const override;
  void restart_at(int64_t epoch) override;
};

}  // namespace dtensor::optim
