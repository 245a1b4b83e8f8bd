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
#include <variant>
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
  // A member of a scheduler saved in its state (register_state).
  using Slot = std::variant<double*, int64_t*, std::vector<int64_t>*, std::vector<double>*>;
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

  // The scheduler's state for a checkpoint, as PyTorch's state_dict (every attribute but the
  // optimizer): "last_epoch" (int64 [1]), "last_lr" and "base_lr" (PyTorch's base_lrs; float64
  // [1]), "kind" (int64 [1], dtensor's: which scheduler saved it), then the scheduler's
  // hyper-parameters and counters in PyTorch's names ("gamma", "step_size", "milestones", "T_max",
  // "eta_min", ...: an integer as int64, a real as float64, a list 1-d), all local DTensors; a
  // SequentialLR or ChainedScheduler adds "<k>.<entry>" for its k-th scheduler. The lambdas of
  // LambdaLR and MultiplicativeLR are not saved (PyTorch saves only callable objects).
  // load_state_dict takes the same entries back, the hyper-parameters included, as PyTorch's
  // overwrites the scheduler's attributes: a scheduler built with other arguments continues the
  // saved schedule. An entry it lacks (a state saved before it was kept: the hyper-parameters
  // before round 8b, "base_lr" before 7c) keeps the constructor's value. Another scheduler's state
  // is refused: an entry the scheduler does not know, a "kind" entry (the scheduler's code, saved
  // from round 8c on) naming another scheduler, or some but not all of its hyper-parameter entries
  // (a state has all or, before 8b, none); so are values its constructor refuses (e.g. T_max 0),
  // and then nothing has changed. It sets the optimizer's learning rate to last_lr, so a run
  // resumed from a checkpoint continues the schedule exactly.
  // checkpoint::training_state(model, optimizer, scheduler, generator) saves it as
  // "lr_scheduler.<entry>" and load_training_state restores it.
  virtual std::vector<std::pair<std::string, DTensor>> state_dict() const;
  virtual void load_state_dict(const std::vector<std::pair<std::string, DTensor>>& state);
  // load_state_dict's checks (names, dtypes, shapes and the hyper-parameters' values), loading
  // nothing: checkpoint::load_training_state runs it before it writes anything.
  void check_state_dict(const std::vector<std::pair<std::string, DTensor>>& state);

 protected:
  // `set_initial_lr`: set the optimizer's initial_lr if unset (every scheduler but
  // ReduceLROnPlateau, which does not in PyTorch).
  LRScheduler(Optimizer& optimizer, std::string name, bool set_initial_lr = true);
  // The first step (PyTorch's _initial_step): every subclass constructor ends with it, and
  // SequentialLR's runs it again on its first scheduler.
  virtual void initial_step();
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
  // A member that state_dict saves and load_state_dict restores as entry `name` (a
  // hyper-parameter or a counter of the schedule): a member of the subclass (schedulers are
  // neither copied nor moved).
  void register_state(std::string name, Slot slot) { slots_.emplace_back(std::move(name), slot); }
  // The constructor's checks of the registered members' values, "[<name>] ..." (load_state_dict
  // runs them on the loaded values).
  virtual void check_values() const {}

  Optimizer* optimizer_;
  std::string name_;  // "LinearLR": the errors' op
  double base_lr_;
  int64_t last_epoch_ = -1;
  double last_lr_ = 0;
  // A SequentialLR's or ChainedScheduler's schedulers (owned; their state is this one's
  // "<k>.<entry>"); empty for the others.
  std::vector<std::unique_ptr<LRScheduler>> children_;
  std::vector<std::pair<std::string, Slot>> slots_;  // register_state's

  // What load_state_dict reads from a state, checked (lr_scheduler.cc).
  struct ParsedState;
  ParsedState parse_state(const std::vector<std::pair<std::string, DTensor>>& state) const;
  // Runs check_values (this scheduler's and its children's) on the parsed values, restoring
  // the members' own values afterwards; throws with them unchanged.
  void check_parsed(const ParsedState& parsed);
  void apply_parsed(const ParsedState& parsed);

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
  void check_values() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr *= gamma at each milestone (a milestone listed n times scales by gamma^n). Its state's
// "milestones" are sorted, repeats kept (PyTorch's Counter).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  double get_lr(bool initial) const override;
  std::optional<double> closed_form_lr() const override;
  void check_values() const override;

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
  void check_values() const override;

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
  void check_values() const override;

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
  void check_values() const override;

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
  void check_values() const override;

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
  void check_values() const override;

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

// The 1cycle policy (PyTorch's OneCycleLR): the learning rate anneals from initial_lr = max_lr /
// div_factor up to max_lr over the first pct_start of total_steps, then down to min_lr =
// initial_lr / final_div_factor (three_phase: back to initial_lr over as many steps, then down
// to min_lr), by a cosine ("cos") or linearly ("linear"). It sets the optimizer's initial_lr
// to initial_lr. cycle_momentum (PyTorch's default) cycles the momentum inversely, between
// max_momentum and base_momentum, through Optimizer::set_hyper_parameters: AdamW's (Adam's)
// "beta1", else SGD's "momentum" (set to max_momentum at construction: an SGD built without
// momentum gets one, as in PyTorch); an optimizer with neither raises. Stepping past
// total_steps raises. Its state holds total_steps, the phases' end steps, the learning rates
// and momenta of the cycle (PyTorch keeps those in the optimizer's param_group).
// OneCycleLR's arguments after max_lr, PyTorch's names and defaults (set the fields:
// OneCycleLROptions o; o.total_steps = 1000; o.anneal_strategy = "linear";).
struct OneCycleLROptions {
  // total_steps, or epochs * steps_per_epoch when it is not given.
  std::optional<int64_t> total_steps, epochs, steps_per_epoch;
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // "cos" or "linear"
  bool cycle_momentum = true;
  double base_momentum = 0.85, max_momentum = 0.95;
  double div_factor = 25.0, final_div_factor = 1e4;
  bool three_phase = false;
};

class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, const OneCycleLROptions& options);
  void step() override;

 protected:
  double get_lr(bool initial) const override;
  void restart_at(int64_t epoch) override;
  void check_values() const override;
  // A step, momentum included (PyTorch's _initial_step runs step(), whose get_lr sets it):
  // SequentialLR's constructor re-sets the momentum of a OneCycleLR that runs first.
  void initial_step() override { restart_at(last_epoch_ + 1); }

 private:
  // The phase of `epoch` and the fraction of it done.
  std::pair<size_t, double> phase(int64_t epoch) const;
  double anneal(double start, double end, double pct) const;
  double lr_at(int64_t epoch) const;
  // The optimizer's momentum (or beta1) at `epoch`, where cycle_momentum.
  double momentum_at(int64_t epoch) const;
  // "beta1" or "momentum".
  std::string momentum_name() const { return use_beta1_ != 0 ? "beta1" : "momentum"; }

  int64_t total_steps_;
  std::vector<double> end_steps_;  // per phase (2, or 3 with three_phase)
  int64_t anneal_linear_;          // 0: "cos", 1: "linear"
  int64_t cycle_momentum_;         // 0 or 1
  int64_t use_beta1_ = 0;          // 1: AdamW's beta1, 0: SGD's momentum
  double initial_lr_, max_lr_, min_lr_, max_momentum_, base_momentum_;
};

// Cosine annealing with warm restarts (SGDR, PyTorch's CosineAnnealingWarmRestarts): lr =
// eta_min + (base_lr - eta_min) (1 + cos(pi T_cur / T_i)) / 2, T_cur counting the steps since
// the last restart, T_i = T_0 at first and T_mult times longer after each restart (T_0 > 0,
// T_mult >= 1). Integer steps only (no fractional epochs).
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0, int64_t T_mult = 1,
                              double eta_min = 0.0);
  void step() override;

 protected:
  double get_lr(bool initial) const override;
  void restart_at(int64_t epoch) override;
  void check_values() const override;

 private:
  int64_t t_0_, t_i_, t_mult_, t_cur_ = -1;
  double eta_min_;
};

// Reduces the learning rate by `factor` (< 1) when a metric stopped improving for more than
// `patience` steps (PyTorch's ReduceLROnPlateau): call step(metric), e.g. with the validation
// loss. mode "min" (the metric should fall) or "max"; an improvement beats the best by more
// than threshold, relatively ("rel": best (1 -+ threshold)) or absolutely ("abs"); after a
// reduction, `cooldown` steps count no bad step; the learning rate stays >= min_lr and a
// change under eps is skipped. It does not set the optimizer's initial_lr (as in PyTorch);
// step() without a metric raises; not allowed in SequentialLR or ChainedScheduler. Its state
// holds "mode" (0: min, 1: max) and "threshold_mode" (0: rel, 1: abs) as int64, PyTorch's
// strings.
class ReduceLROnPlateau : public LRScheduler {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, const std::string& mode = "min",
                             double factor = 0.1, int64_t patience = 10, double threshold = 1e-4,
                             const std::string& threshold_mode = "rel", int64_t cooldown = 0,
                             double min_lr = 0.0, double eps = 1e-8);
  void step(double metric);
  void step() override;
  // The best metric so far and the bad steps counted since.
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }

 protected:
  double get_lr(bool initial) const override;
  void restart_at(int64_t epoch) override;
  void check_values() const override;

 private:
  bool is_better(double a) const;

  int64_t mode_max_, threshold_abs_;  // 0 / 1
  double factor_, threshold_, min_lr_, eps_, best_;
  int64_t patience_, cooldown_, cooldown_counter_ = 0, num_bad_epochs_ = 0;
};

}  // namespace dtensor::optim
