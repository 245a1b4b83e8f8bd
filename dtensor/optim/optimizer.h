// Optimizers over DTensor parameters (libtorch's torch::optim names): SGD, Adam, AdamW, RMSprop
// and Adagrad, and clip_grad_norm_ / clip_grad_value_.
//
// A parameter keeps its placements; its grad() has the same placements (autograd lays every
// leaf gradient out like the leaf), so an update runs on each rank's local shard alone, with no
// communication, and its states (momentum buffers, Adam moments) are DTensors with the
// parameter's spec. Each update is one fused pass over the shard (detail/optim_kernels.h).
// Replicate parameters are updated redundantly on every rank, with identical results. Partial
// parameters are refused (an update of a partial value is not the partial of the update).
// Steps run under NoGradGuard and bump the parameter's version, so a backward through a graph
// recorded before the step refuses to read the stale values.
#pragma once

#include <absl/functional/function_ref.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::optim {

// Chainable setters and getters, libtorch style: SGDOptions(0.1).momentum(0.9).nesterov(true).
#define DT_OPTIM_ARG(type, name, init) \
 public:                               \
  auto& name(type v) {                 \
    name##_ = v;                       \
    return *this;                      \
  }                                    \
  type name() const {                  \
    return name##_;                    \
  }                                    \
                                       \
 private:                              \
  type name##_ = init

// SGD hyper-parameters (torch::optim::SGDOptions): learning rate, momentum, dampening, weight
// decay, Nesterov, maximize; each has a getter and a chainable setter.
struct SGDOptions {
  // The learning rate; the rest default to 0 / false.
  explicit SGDOptions(double lr) : lr_(lr) {}
  // Getter and chainable setter of each hyper-parameter (defaults as in PyTorch).
  DT_OPTIM_ARG(double, lr, 0.0);
  DT_OPTIM_ARG(double, momentum, 0.0);
  DT_OPTIM_ARG(double, dampening, 0.0);
  DT_OPTIM_ARG(double, weight_decay, 0.0);
  DT_OPTIM_ARG(bool, nesterov, false);
  // Ascends the objective: the gradient is negated before use.
  DT_OPTIM_ARG(bool, maximize, false);
};

// AdamW hyper-parameters (torch::optim::AdamWOptions): learning rate, betas, eps, weight decay,
// amsgrad, maximize, and PyTorch's param_group flag decoupled_weight_decay; each has a getter and
// a chainable setter.
struct AdamWOptions {
  // The learning rate; the rest take PyTorch's defaults.
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  // Getter and chainable setter of each hyper-parameter (defaults as in PyTorch).
  DT_OPTIM_ARG(double, lr, 1e-3);
  DT_OPTIM_ARG(double, beta1, 0.9);
  DT_OPTIM_ARG(double, beta2, 0.999);
  DT_OPTIM_ARG(double, eps, 1e-8);
  DT_OPTIM_ARG(double, weight_decay, 1e-2);
  DT_OPTIM_ARG(bool, amsgrad, false);
  // Ascends the objective: the gradient is negated before use.
  DT_OPTIM_ARG(bool, maximize, false);
  // PyTorch's param_group['decoupled_weight_decay'], true in AdamW's: false makes the weight
  // decay L2 (Adam's, g += wd p) until set back. AdamW's load_state_dict sets it back to true.
  DT_OPTIM_ARG(bool, decoupled_weight_decay, true);
};

// Adam hyper-parameters (torch::optim::AdamOptions, PyTorch 2.15's torch.optim.Adam): weight
// decay is L2 (added to the gradient) unless decoupled_weight_decay (then AdamW's).
struct AdamOptions {
  // The learning rate; the rest take PyTorch's defaults.
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  // Getter and chainable setter of each hyper-parameter (defaults as in PyTorch).
  DT_OPTIM_ARG(double, lr, 1e-3);
  DT_OPTIM_ARG(double, beta1, 0.9);
  DT_OPTIM_ARG(double, beta2, 0.999);
  DT_OPTIM_ARG(double, eps, 1e-8);
  DT_OPTIM_ARG(double, weight_decay, 0.0);
  DT_OPTIM_ARG(bool, amsgrad, false);
  // Ascends the objective: the gradient is negated before use.
  DT_OPTIM_ARG(bool, maximize, false);
  // Weight decay as AdamW's (p -= lr wd p) instead of L2 (g += wd p).
  DT_OPTIM_ARG(bool, decoupled_weight_decay, false);
};

// RMSprop hyper-parameters (torch.optim.RMSprop): learning rate, smoothing constant alpha,
// eps, weight decay (L2), momentum, centered, maximize.
struct RMSpropOptions {
  // The learning rate; the rest take PyTorch's defaults.
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  // Getter and chainable setter of each hyper-parameter (defaults as in PyTorch).
  DT_OPTIM_ARG(double, lr, 1e-2);
  DT_OPTIM_ARG(double, alpha, 0.99);
  DT_OPTIM_ARG(double, eps, 1e-8);
  DT_OPTIM_ARG(double, weight_decay, 0.0);
  DT_OPTIM_ARG(double, momentum, 0.0);
  // Normalises by the estimated variance (square_avg - grad_avg^2) instead of square_avg.
  DT_OPTIM_ARG(bool, centered, false);
  // Ascends the objective: the gradient is negated before use.
  DT_OPTIM_ARG(bool, maximize, false);
};

// Adagrad hyper-parameters (torch.optim.Adagrad): learning rate, its decay, weight decay (L2),
// the accumulator's initial value, eps, maximize.
struct AdagradOptions {
  // The learning rate; the rest take PyTorch's defaults.
  explicit AdagradOptions(double lr = 1e-2) : lr_(lr) {}
  // Getter and chainable setter of each hyper-parameter (defaults as in PyTorch).
  DT_OPTIM_ARG(double, lr, 1e-2);
  DT_OPTIM_ARG(double, lr_decay, 0.0);
  DT_OPTIM_ARG(double, weight_decay, 0.0);
  DT_OPTIM_ARG(double, initial_accumulator_value, 0.0);
  DT_OPTIM_ARG(double, eps, 1e-10);
  // Ascends the objective: the gradient is negated before use.
  DT_OPTIM_ARG(bool, maximize, false);
};

#undef DT_OPTIM_ARG

// Base of the optimizers: holds the parameters (DTensors that require grad) and the step
// count; step() updates each rank's shards with no communication.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient (parameters without one are skipped).
  virtual void step() = 0;
  // Clears the parameters' gradients (set_to_none, PyTorch's default) or zeroes them.
  void zero_grad(bool set_to_none = true);
  const std::vector<DTensor>& parameters() const { return params_; }
  // Steps taken so far.
  int64_t step_count() const { return steps_; }
  // The learning rate, which the schedulers (lr_scheduler.h) read and set: each optimizer's
  // options().lr; an optimizer without one raises "[<name>] has no learning rate".
  virtual double lr() const;
  virtual void set_lr(double lr);
  // PyTorch's param_group["initial_lr"]: the learning rate when the first scheduler was
  // attached, the base of every scheduler attached after it (empty before).
  std::optional<double> initial_lr() const { return initial_lr_; }
  void set_initial_lr(double lr) { initial_lr_ = lr; }

  // The optimizer's state as named DTensors with their parameters' specs ("<i>.<state>", e.g.
  // "3.exp_avg"; i indexes parameters()) plus "step" (a 1-element int64 local DTensor), ready
  // for a checkpoint; load_state_dict takes the same names back (shapes must match). An
  // optimizer that counts each parameter's updates (Adam, AdamW, RMSprop, Adagrad: PyTorch's
  // state["step"]) adds
  // "<i>.step" (1-element int64 local) for every parameter updated so far; a state without them
  // (saved before they existed) gives each parameter with state the global count.
  // PyTorch's param_groups (one group): "param_groups.<name>" for each hyper-parameter
  // (hyper_parameters(): "param_groups.lr", "param_groups.momentum", ...; a bool as 0 or 1) and
  // "param_groups.initial_lr" once a scheduler set it, each a 1-element float64 local DTensor.
  // As in PyTorch, load_state_dict sets them: the loaded lr wins over the constructor's. A
  // state without them (saved before they existed) keeps the optimizer's own. An entry naming
  // no state, step count or hyper-parameter of this optimizer is refused (PyTorch would keep
  // it silently: an AdamW state loaded into SGD would then restart its momentum).
  std::vector<std::pair<std::string, DTensor>> state_dict() const;
  void load_state_dict(const std::vector<std::pair<std::string, DTensor>>& state);
  // load_state_dict's checks of names, specs and dtypes and of the hyper-parameters' names and
  // values (check_hyper_parameters), loading and changing nothing:
  // checkpoint::load_training_state runs them on its targets before it loads anything, so that
  // another optimizer's checkpoint changes nothing, and on the loaded values before it writes
  // the model.
  void check_state_dict(const std::vector<std::pair<std::string, DTensor>>& state) const;
  // The hyper-parameters of PyTorch's param_group (without "params" and "initial_lr"), in
  // PyTorch's names but Adam's and AdamW's betas as beta1 and beta2: name -> value, a bool as 0
  // or 1.
  virtual std::vector<std::pair<std::string, double>> hyper_parameters() const { return {}; }
  // Sets the named hyper-parameters (the others keep their values), checked as the constructor
  // checks its options: "[<name>] ..." for an unknown name or an invalid value, and then none
  // has changed.
  virtual void set_hyper_parameters(const std::vector<std::pair<std::string, double>>& values);
  // Checks `values` as set_hyper_parameters would, changing nothing: "[<name>] ..." for an
  // unknown name or an invalid value. The base checks the names against hyper_parameters(); an
  // optimizer whose values have constraints overrides it (the library's check as their
  // constructors do).
  virtual void check_hyper_parameters(
      const std::vector<std::pair<std::string, double>>& values) const;

  // Follows parameters a wrapper put in place of the ones given (compile's data-parallel
  // expansion: data_parallel's sharded or replicated storage parameters): `params[i]` takes the
  // place of parameter i, with the same global shape and dtype. Only before any state exists
  // (no step taken, no state loaded): "[optimizer] ..." otherwise.
  void replace_parameters(std::vector<DTensor> params);

 protected:
  // Throws "[<name>] parameter i ..." for an undefined, non-floating or Partial parameter.
  Optimizer(std::vector<DTensor> params, std::string_view name);
  // Makes `slots` (a member of the subclass: one state tensor per parameter, undefined until
  // used) part of state_dict as "<i>.<name>", after the slots registered before it.
  void register_state(std::string name, std::vector<DTensor>* slots);
  // Makes the optimizer count each parameter's own updates (param_steps_, "<i>.step" in
  // state_dict): a parameter without a gradient at some step is not updated, and PyTorch's
  // bias corrections then use its own count, not the number of step() calls.
  void count_parameter_steps() { param_steps_.assign(params_.size(), 0); }
  // The state `slot` of parameter i, created like the parameter on first use, filled with
  // `init` (0: zeros; Adagrad's initial_accumulator_value).
  DTensor& state(std::vector<DTensor>& slots, size_t i, double init = 0.0);
  // The loop of every step(): with grad mode off, counts the step (++steps_, as a step of its
  // own when a step is captured, so replay counts too), then calls update(i, p, g) for each
  // parameter p (index i) that has a gradient g. The recorded update bumps p's version when it
  // writes, so a compiled replay's update does too: a graph kept across a replayed step then
  // refuses its backward, as it does across an eager one.
  void update_each(absl::FunctionRef<void(size_t i, const DTensor& p, const DTensor& g)> update);
  // Run at the end of load_state_dict (PyTorch's __setstate__): AdamW sets its
  // decoupled_weight_decay back to true.
  virtual void loaded() {}

  std::vector<DTensor> params_;  // the parameters, in the order given
  std::string name_;             // "SGD", "AdamW": the errors' op
  int64_t steps_ = 0;            // step() calls so far
  std::optional<double> initial_lr_;
  // Per parameter, the updates it has had (count_parameter_steps; empty otherwise). Updates
  // increment it when they run (a replayed update included).
  std::vector<int64_t> param_steps_;
  // What load_state_dict reads from a state, checked (optimizer.cc).
  struct ParsedState;
  ParsedState parse_state(const std::vector<std::pair<std::string, DTensor>>& state) const;
  // register_state's slots by name (members of this object, which is neither copied nor moved).
  std::vector<std::pair<std::string, std::vector<DTensor>*>> state_slots_;
  // Watched by the updates a compiled step replays (they run on this object): a replay after
  // the optimizer is destroyed raises (dtensor/tensor/detail/capture_hook.h, check_alive).
  std::shared_ptr<const char> alive_ = std::make_shared<const char>(0);
};

// An optimizer whose hyper-parameters are the options struct O (SGDOptions, AdamOptions, ...;
// PyTorch's param_group): options(), the learning rate, and the hyper-parameters by name (the
// table of O's in optimizer.cc), checked as the constructor checks O. Base: Optimizer, or
// AdamBase for Adam and AdamW. Defined in optimizer.cc for the five optimizers.
template <typename O, typename Base = Optimizer>
class OptimizerWith : public Base {
 public:
  const O& options() const { return options_; }
  // The options to change between steps (a learning-rate schedule); a captured step reads them
  // when it replays.
  O& options() { return options_; }
  double lr() const override { return options_.lr(); }
  void set_lr(double lr) override { options_.lr(lr); }
  std::vector<std::pair<std::string, double>> hyper_parameters() const override;
  void set_hyper_parameters(const std::vector<std::pair<std::string, double>>& values) override;
  void check_hyper_parameters(
      const std::vector<std::pair<std::string, double>>& values) const override;

 protected:
  // Base's checks of `params` ("[<name>] parameter i ..."), then the options' ("[<name>] ...").
  OptimizerWith(std::vector<DTensor> params, std::string_view name, O options);
  O options_;
};

// Stochastic gradient descent with momentum, dampening, Nesterov and weight decay (PyTorch's
// formula): g = -g when maximize; d = g + wd p; b = d on the first step, else momentum b + (1 -
// dampening) d; d = d + momentum b (nesterov) or b; p -= lr d.
class SGD : public OptimizerWith<SGDOptions> {
 public:
  // Optimizes `params` (checked: defined, floating, not Partial); options() returns them.
  SGD(std::vector<DTensor> params, SGDOptions options);
  void step() override;

 private:
  std::vector<DTensor> momentum_;  // per parameter, undefined until used
};

// Adam and AdamW: the moments exp_avg, exp_avg_sq (and amsgrad's max_exp_avg_sq) and the
// per-parameter step count, updated by one kernel; they differ only in where weight decay goes
// (PyTorch's formula), read from decoupled_weight_decay at each update: g = -g when maximize;
// L2: g += wd p, or decoupled: p -= lr wd p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// (amsgrad: vmax = max(vmax, v)); p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps),
// where t counts the updates of that parameter (steps where it had no gradient do not count, as
// in PyTorch).
class AdamBase : public Optimizer {
 public:
  void step() override;

 protected:
  AdamBase(std::vector<DTensor> params, std::string_view name);
  // The hyper-parameters an update reads when it runs (a compiled step's replay included).
  virtual AdamOptions adam_options() const = 0;

 private:
  std::vector<DTensor> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
};

// Adam (torch.optim.Adam): L2 weight decay (added to the gradient), or AdamW's with
// decoupled_weight_decay. A state loaded keeps its decoupled_weight_decay (an AdamW state makes
// Adam decoupled, as PyTorch's).
class Adam : public OptimizerWith<AdamOptions, AdamBase> {
 public:
  // Optimizes `params` (checked: defined, floating, not Partial); options() returns them.
  Adam(std::vector<DTensor> params, AdamOptions options = AdamOptions());

 private:
  AdamOptions adam_options() const override { return options_; }
};

// AdamW (torch.optim.AdamW, PyTorch's defaults): Adam with decoupled_weight_decay true
// (p -= lr wd p). As in PyTorch 2.15, the flag is the group's: set_hyper_parameters (or
// options()) setting it to 0 makes the weight decay L2 until set back, and load_state_dict sets
// it back to 1 whatever the state held (an Adam state with L2 included).
class AdamW : public OptimizerWith<AdamWOptions, AdamBase> {
 public:
  // Optimizes `params` (checked: defined, floating, not Partial); options() returns them.
  AdamW(std::vector<DTensor> params, AdamWOptions options = AdamWOptions());

 private:
  AdamOptions adam_options() const override;
  void loaded() override { options_.decoupled_weight_decay(true); }
};

// RMSprop (torch.optim.RMSprop's formula): g = -g when maximize; g += wd p;
// square_avg = alpha square_avg + (1 - alpha) g^2; centered: grad_avg = alpha grad_avg +
// (1 - alpha) g and avg = sqrt(square_avg - grad_avg^2) + eps, else avg = sqrt(square_avg) + eps;
// momentum > 0: momentum_buffer = momentum momentum_buffer + g / avg, p -= lr momentum_buffer;
// else p -= lr g / avg. States: square_avg, momentum_buffer (momentum > 0), grad_avg (centered)
// and each parameter's step count.
class RMSprop : public OptimizerWith<RMSpropOptions> {
 public:
  // Optimizes `params` (checked: defined, floating, not Partial); options() returns them.
  RMSprop(std::vector<DTensor> params, RMSpropOptions options = RMSpropOptions());
  void step() override;

 private:
  std::vector<DTensor> square_avg_, momentum_buffer_, grad_avg_;
};

// Adagrad (torch.optim.Adagrad's formula): g = -g when maximize; g += wd p;
// sum += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps), where t counts the
// updates of that parameter. States: sum (starting at initial_accumulator_value) and each
// parameter's step count.
class Adagrad : public OptimizerWith<AdagradOptions> {
 public:
  // Optimizes `params` (checked: defined, floating, not Partial); options() returns them.
  Adagrad(std::vector<DTensor> params, AdagradOptions options = AdagradOptions());
  void step() override;

 private:
  std::vector<DTensor> sum_;
};

// Scales the gradients of `params` in place so that their total norm (the p-norm of all
// gradients together, as if concatenated; norm_type may be inf) is at most max_norm, and
// returns the total norm before clipping (torch.nn.utils.clip_grad_norm_). Sharded gradients
// contribute each shard once: per mesh, the local sums are reduced with at most one
// all-reduce per sharded mesh dim; replicated gradients are not reduced. Every rank of every
// mesh holding a parameter must call it. Parameters without a gradient are ignored. As in
// PyTorch, a NaN or infinite norm still scales (NaN gradients everywhere for a NaN norm, a
// factor of 0 for an infinite one) unless error_if_nonfinite, which raises on every rank and
// leaves the gradients as they were.
double clip_grad_norm_(const std::vector<DTensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps the gradients of `params` in place to [-clip_value, clip_value]
// (torch.nn.utils.clip_grad_value_): elementwise, so each rank clamps its local shard of a
// sharded gradient, with no communication. Parameters without a gradient are skipped; NaN stays
// NaN; a negative clip_value sets every element to clip_value, as PyTorch's clamp(min > max).
// A Partial gradient (not yet reduced) and a NaN clip_value raise "[clip_grad_value_] ...".
void clip_grad_value_(const std::vector<DTensor>& params, double clip_value);

}  // namespace dtensor::optim
