#include "dtensor/optim/lr_scheduler.h"

#include <absl/strings/str_cat.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::optim {

namespace {

// The number of milestones <= epoch (Python's bisect_right on a sorted list).
int64_t count_up_to(const std::vector<int64_t>& sorted, int64_t epoch) {
  return std::upper_bound(sorted.begin(), sorted.end(), epoch) - sorted.begin();
}

template <typename T>
DTensor scalar_entry(T value) {
  return local_dtensor(from_vector(std::vector<T>{value}, {1}));
}

// The value of entry `name` (a 1-element local tensor of dtype T) in `state`.
template <typename T>
T read_entry(const std::vector<std::pair<std::string, DTensor>>& state, const std::string& name,
             const std::string& op) {
  for (const auto& [key, value] : state) {
    if (key != name) continue;
    const Tensor local = value.to_local();
    DT_CHECK(local.numel() == 1 && local.dtype() == dtype_of_v<T>,
             "[%s] load_state_dict: entry '%s' is %s of shape %s, expected a 1-element %s", op,
             name, dtype_name(local.dtype()), shape_str(local.sizes()), dtype_name(dtype_of_v<T>));
    return local.to(Device(kCPU)).data<T>()[0];
  }
  DT_FAIL("[%s] load_state_dict: no '%s' entry", op, name);
}

// The value of entry `name` as read_entry reads it, or nullopt when `state` has no such entry.
template <typename T>
std::optional<T> read_optional(const std::vector<std::pair<std::string, DTensor>>& state,
                               const std::string& name, const std::string& op) {
  for (const auto& [key, value] : state) {
    if (key == name) return read_entry<T>(state, name, op);
  }
  return std::nullopt;
}

// The entries of `state` named "<prefix><rest>", renamed "<rest>".
std::vector<std::pair<std::string, DTensor>> entries_under(
    const std::vector<std::pair<std::string, DTensor>>& state, const std::string& prefix) {
  std::vector<std::pair<std::string, DTensor>> out;
  for (const auto& [key, value] : state) {
    if (key.compare(0, prefix.size(), prefix) == 0)
      out.emplace_back(key.substr(prefix.size()), value);
  }
  return out;
}

void check_children(const std::string& op, const Optimizer& optimizer,
                    const std::vector<std::unique_ptr<LRScheduler>>& schedulers, bool simple_only) {
  DT_CHECK(!schedulers.empty(), "[%s] expects at least one scheduler, got none", op);
  for (size_t k = 0; k < schedulers.size(); ++k) {
    DT_CHECK(schedulers[k] != nullptr, "[%s] scheduler %d is null", op, k);
    DT_CHECK(&schedulers[k]->optimizer() == &optimizer,
             "[%s] scheduler %d belongs to another optimizer (all must be on the given one)", op,
             k);
    DT_CHECK(
        !simple_only || (dynamic_cast<const SequentialLR*>(schedulers[k].get()) == nullptr &&
                         dynamic_cast<const ChainedScheduler*>(schedulers[k].get()) == nullptr),
        "[%s] scheduler %d is a SequentialLR or ChainedScheduler: expected a simple scheduler", op,
        k);
  }
}

}  // namespace

// ---- LRScheduler -------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name)
    : optimizer_(&optimizer), name_(std::move(name)) {
  // PyTorch's group.setdefault("initial_lr", group["lr"]): the first scheduler fixes the base.
  if (!optimizer.initial_lr()) optimizer.set_initial_lr(optimizer.lr());
  base_lr_ = *optimizer.initial_lr();
}

void LRScheduler::initial_step() {
  ++last_epoch_;
  set_lr(get_lr(/*initial=*/true));
}

void LRScheduler::step() {
  ++last_epoch_;
  set_lr(get_lr(/*initial=*/false));
}

void LRScheduler::restart_at(int64_t epoch) {
  last_epoch_ = epoch;
  const std::optional<double> closed = closed_form_lr();
  set_lr(closed ? *closed : get_lr(/*initial=*/false));
}

void LRScheduler::set_lr(double lr) {
  optimizer_->set_lr(lr);
  last_lr_ = lr;
}

std::vector<std::pair<std::string, DTensor>> LRScheduler::state_dict() const {
  std::vector<std::pair<std::string, DTensor>> out = {
      {"last_epoch", scalar_entry<int64_t>(last_epoch_)},
      {"last_lr", scalar_entry<double>(last_lr_)},
      {"base_lr", scalar_entry<double>(base_lr_)}};
  for (size_t k = 0; k < children_.size(); ++k) {
    for (auto& [name, value] : children_[k]->state_dict())
      out.emplace_back(absl::StrCat(k, ".", name), value);
  }
  return out;
}

void LRScheduler::load_state_dict(const std::vector<std::pair<std::string, DTensor>>& state) {
  // Every entry is read before anything changes: a refused state leaves the schedule as it was.
  const int64_t epoch = read_entry<int64_t>(state, "last_epoch", name_);
  const double lr = read_entry<double>(state, "last_lr", name_);
  // PyTorch's base_lrs: absent from a state saved before it was kept (the constructor's stays).
  const std::optional<double> base = read_optional<double>(state, "base_lr", name_);
  std::vector<std::vector<std::pair<std::string, DTensor>>> parts;
  for (size_t k = 0; k < children_.size(); ++k) {
    parts.push_back(entries_under(state, absl::StrCat(k, ".")));
    const std::string op = absl::StrCat(name_, " scheduler ", k);
    read_entry<int64_t>(parts.back(), "last_epoch", op);
    read_entry<double>(parts.back(), "last_lr", op);
    read_optional<double>(parts.back(), "base_lr", op);
  }
  for (size_t k = 0; k < children_.size(); ++k) children_[k]->load_state_dict(parts[k]);
  if (base) base_lr_ = *base;
  last_epoch_ = epoch;
  set_lr(lr);  // last: the composite's learning rate is the one its children left
}

// ---- the schedules -------------------------------------------------------------------------

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(optimizer, "LambdaLR"), lr_lambda_(std::move(lr_lambda)) {
  DT_CHECK(static_cast<bool>(lr_lambda_), "[LambdaLR] lr_lambda is empty");
  initial_step();
}

double LambdaLR::get_lr(bool) const {
  return base_lr_ * lr_lambda_(last_epoch_);
}

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(optimizer, "MultiplicativeLR"), lr_lambda_(std::move(lr_lambda)) {
  DT_CHECK(static_cast<bool>(lr_lambda_), "[MultiplicativeLR] lr_lambda is empty");
  initial_step();
}

double MultiplicativeLR::get_lr(bool initial) const {
  return initial ? current_lr() : current_lr() * lr_lambda_(last_epoch_);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  DT_CHECK(step_size > 0, "[StepLR] step_size %d, expected > 0", step_size);
  initial_step();
}

double StepLR::get_lr(bool) const {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current_lr();
  return current_lr() * gamma_;
}

std::optional<double> StepLR::closed_form_lr() const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

double MultiStepLR::get_lr(bool) const {
  const auto [first, last] = std::equal_range(milestones_.begin(), milestones_.end(), last_epoch_);
  if (first == last) return current_lr();
  return current_lr() * std::pow(gamma_, static_cast<double>(last - first));
}

std::optional<double> MultiStepLR::closed_form_lr() const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(count_up_to(milestones_, last_epoch_)));
}

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, int64_t total_iters)
    : LRScheduler(optimizer, "ConstantLR"), factor_(factor), total_iters_(total_iters) {
  DT_CHECK(factor >= 0 && factor <= 1, "[ConstantLR] factor %g, expected in [0, 1]", factor);
  initial_step();
}

double ConstantLR::get_lr(bool) const {
  if (last_epoch_ == 0) return current_lr() * factor_;
  if (last_epoch_ != total_iters_) return current_lr();
  return current_lr() * (1.0 / factor_);
}

std::optional<double> ConstantLR::closed_form_lr() const {
  return base_lr_ * (factor_ + (last_epoch_ >= total_iters_ ? 1.0 - factor_ : 0.0));
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  DT_CHECK(start_factor > 0 && start_factor <= 1, "[LinearLR] start_factor %g, expected in (0, 1]",
           start_factor);
  DT_CHECK(end_factor >= 0 && end_factor <= 1, "[LinearLR] end_factor %g, expected in [0, 1]",
           end_factor);
  DT_CHECK(total_iters > 0, "[LinearLR] total_iters %d, expected > 0", total_iters);
  initial_step();
}

double LinearLR::get_lr(bool initial) const {
  if (last_epoch_ == 0) return current_lr() * start_factor_;
  if (initial || last_epoch_ > total_iters_) return current_lr();
  const double delta = end_factor_ - start_factor_;
  return current_lr() * (1.0 + delta / (static_cast<double>(total_iters_) * start_factor_ +
                                        static_cast<double>(last_epoch_ - 1) * delta));
}

std::optional<double> LinearLR::closed_form_lr() const {
  return base_lr_ * (start_factor_ + (end_factor_ - start_factor_) *
                                         static_cast<double>(std::min(total_iters_, last_epoch_)) /
                                         static_cast<double>(total_iters_));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LRScheduler(optimizer, "ExponentialLR"), gamma_(gamma) {
  initial_step();
}

double ExponentialLR::get_lr(bool initial) const {
  return initial ? current_lr() : current_lr() * gamma_;
}

std::optional<double> ExponentialLR::closed_form_lr() const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(last_epoch_));
}

PolynomialLR::PolynomialLR(Optimizer& optimizer, int64_t total_iters, double power)
    : LRScheduler(optimizer, "PolynomialLR"), total_iters_(total_iters), power_(power) {
  DT_CHECK(total_iters > 0, "[PolynomialLR] total_iters %d, expected > 0", total_iters);
  initial_step();
}

double PolynomialLR::get_lr(bool initial) const {
  if (initial || last_epoch_ > total_iters_) return current_lr();
  const double n = static_cast<double>(total_iters_);
  const double factor = std::pow((1.0 - static_cast<double>(last_epoch_) / n) /
                                     (1.0 - static_cast<double>(last_epoch_ - 1) / n),
                                 power_);
  return current_lr() * factor;
}

std::optional<double> PolynomialLR::closed_form_lr() const {
  const double n = static_cast<double>(total_iters_);
  return base_lr_ *
         std::pow(1.0 - static_cast<double>(std::min(total_iters_, last_epoch_)) / n, power_);
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), t_max_(T_max), eta_min_(eta_min) {
  DT_CHECK(T_max > 0, "[CosineAnnealingLR] T_max %d, expected > 0", T_max);
  initial_step();
}

double CosineAnnealingLR::get_lr(bool initial) const {
  constexpr double pi = std::numbers::pi;
  const double t = static_cast<double>(t_max_);
  const double e = static_cast<double>(last_epoch_);
  if (initial) return current_lr();
  // At the cosine's minimum the ratio below is 0/0: PyTorch steps back up by the first
  // step's decrement instead.
  if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0)
    return current_lr() + (base_lr_ - eta_min_) * (1.0 - std::cos(pi / t)) / 2.0;
  return (1.0 + std::cos(pi * e / t)) / (1.0 + std::cos(pi * (e - 1.0) / t)) *
             (current_lr() - eta_min_) +
         eta_min_;
}

std::optional<double> CosineAnnealingLR::closed_form_lr() const {
  constexpr double pi = std::numbers::pi;
  return eta_min_ +
         (base_lr_ - eta_min_) *
             (1.0 + std::cos(pi * static_cast<double>(last_epoch_) / static_cast<double>(t_max_))) /
             2.0;
}

// ---- composites ----------------------------------------------------------------------------

SequentialLR::SequentialLR(Optimizer& optimizer,
                           std::vector<std::unique_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer, "SequentialLR"), milestones_(std::move(milestones)) {
  children_ = std::move(schedulers);
  check_children(name_, optimizer, children_, /*simple_only=*/true);
  DT_CHECK(milestones_.size() + 1 == children_.size(),
           "[SequentialLR] %d schedulers and %d milestones, expected one milestone fewer than "
           "schedulers",
           children_.size(), milestones_.size());
  DT_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
           "[SequentialLR] milestones must be in increasing order");
  // As PyTorch: back to the initial learning rate, every scheduler one step back (each took
  // its first step when built), then the first step of the one that runs at epoch 0.
  last_epoch_ = 0;
  optimizer.set_lr(base_lr_);
  for (auto& s : children_) --s->last_epoch_;
  LRScheduler& first = *children_[count_up_to(milestones_, 0)];
  first.initial_step();
  last_lr_ = first.get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  const int64_t k = count_up_to(milestones_, last_epoch_);
  LRScheduler& s = *children_[k];
  if (k > 0 && milestones_[k - 1] == last_epoch_) {
    s.restart_at(0);
  } else {
    s.step();
  }
  last_lr_ = s.get_last_lr();
}

double SequentialLR::get_lr(bool) const {
  return last_lr_;
}

void SequentialLR::restart_at(int64_t) {
  DT_FAIL("[SequentialLR] cannot be restarted at an epoch (nested in another scheduler)");
}

ChainedScheduler::ChainedScheduler(Optimizer& optimizer,
                                   std::vector<std::unique_ptr<LRScheduler>> schedulers)
    : LRScheduler(optimizer, "ChainedScheduler") {
  children_ = std::move(schedulers);
  check_children(name_, optimizer, children_, /*simple_only=*/false);
  last_epoch_ = 0;
  last_lr_ = optimizer.lr();
}

void ChainedScheduler::step() {
  ++last_epoch_;
  for (auto& s : children_) s->step();
  last_lr_ = optimizer_->lr();
}

double ChainedScheduler::get_lr(bool) const {
  return last_lr_;
}

void ChainedScheduler::restart_at(int64_t) {
  DT_FAIL("[ChainedScheduler] cannot be restarted at an epoch (nested in another scheduler)");
}

}  // namespace dtensor::optim
