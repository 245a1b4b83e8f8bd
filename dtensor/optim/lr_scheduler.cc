#include "dtensor/optim/lr_scheduler.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

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

using State = std::vector<std::pair<std::string, DTensor>>;
// A registered member's value (LRScheduler::Slot's pointee).
using Value = std::variant<double, int64_t, std::vector<int64_t>, std::vector<double>>;

template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};

// The entry named `name` in `state`, or nullptr.
const DTensor* find_entry(const State& state, const std::string& name) {
  for (const auto& [key, value] : state) {
    if (key == name) return &value;
  }
  return nullptr;
}

// The value of `entry` (named `name`) as a T: a 1-element tensor of T's dtype, or a 1-d one of
// its elements' for a vector.
template <typename T>
T read_value(const DTensor& entry, const std::string& name, const std::string& op) {
  const Tensor local = entry.to_local();
  if constexpr (is_vector<T>::value) {
    using E = typename T::value_type;
    DT_CHECK(local.dim() == 1 && local.dtype() == dtype_of_v<E>,
             "[%s] load_state_dict: entry '%s' is %s of shape %s, expected a 1-d %s", op, name,
             dtype_name(local.dtype()), shape_str(local.sizes()), dtype_name(dtype_of_v<E>));
    return local.to(Device(kCPU)).to_vector<E>();
  } else {
    DT_CHECK(local.numel() == 1 && local.dtype() == dtype_of_v<T>,
             "[%s] load_state_dict: entry '%s' is %s of shape %s, expected a 1-element %s", op,
             name, dtype_name(local.dtype()), shape_str(local.sizes()), dtype_name(dtype_of_v<T>));
    return local.to(Device(kCPU)).data<T>()[0];
  }
}

// The value of entry `name` in `state` (read_value), or nullopt when `state` has none.
template <typename T>
std::optional<T> read_optional(const State& state, const std::string& name, const std::string& op) {
  const DTensor* entry = find_entry(state, name);
  if (entry == nullptr) return std::nullopt;
  return read_value<T>(*entry, name, op);
}

template <typename T>
T read_entry(const State& state, const std::string& name, const std::string& op) {
  const std::optional<T> v = read_optional<T>(state, name, op);
  if (!v) DT_FAIL("[%s] load_state_dict: no '%s' entry", op, name);
  return *v;
}

// The state entry of a registered member's value.
template <typename T>
DTensor entry_of(const T& value) {
  if constexpr (is_vector<T>::value) {
    return local_dtensor(from_vector(value, {static_cast<int64_t>(value.size())}));
  } else {
    return scalar_entry<T>(value);
  }
}

Value value_of(const LRScheduler::Slot& slot) {
  return std::visit([](auto* p) -> Value { return *p; }, slot);
}

void assign(const LRScheduler::Slot& slot, const Value& value) {
  std::visit([&](auto* p) { *p = std::get<std::remove_pointer_t<decltype(p)>>(value); }, slot);
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
    DT_CHECK(dynamic_cast<const ReduceLROnPlateau*>(schedulers[k].get()) == nullptr,
             "[%s] scheduler %d is a ReduceLROnPlateau, which steps on a metric: not supported "
             "here (as in PyTorch's ChainedScheduler)",
             op, k);
  }
}

// The code of each scheduler in its state's "kind" entry: its index here plus 1 (append only:
// saved states hold these codes). Tells apart schedulers whose states have the same entries
// (LambdaLR's and MultiplicativeLR's have none of their own).
constexpr std::array<std::string_view, 14> kKinds = {"LambdaLR",
                                                     "MultiplicativeLR",
                                                     "StepLR",
                                                     "MultiStepLR",
                                                     "ConstantLR",
                                                     "LinearLR",
                                                     "ExponentialLR",
                                                     "PolynomialLR",
                                                     "CosineAnnealingLR",
                                                     "SequentialLR",
                                                     "ChainedScheduler",
                                                     "OneCycleLR",
                                                     "CosineAnnealingWarmRestarts",
                                                     "ReduceLROnPlateau"};

// `name`'s code in kKinds, 0 for a scheduler outside it (a user's subclass: no "kind" entry).
int64_t kind_code(const std::string& name) {
  const auto* it = std::find(kKinds.begin(), kKinds.end(), name);
  return it == kKinds.end() ? 0 : (it - kKinds.begin()) + 1;
}

std::string kind_name(int64_t code) {
  if (code >= 1 && code <= static_cast<int64_t>(kKinds.size()))
    return std::string(kKinds[code - 1]);
  return absl::StrCat("an unknown scheduler (kind ", code, ")");
}

}  // namespace

// ---- LRScheduler -------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name, bool set_initial_lr)
    : optimizer_(&optimizer), name_(std::move(name)) {
  // PyTorch's group.setdefault("initial_lr", group["lr"]): the first scheduler fixes the base.
  if (set_initial_lr && !optimizer.initial_lr()) optimizer.set_initial_lr(optimizer.lr());
  base_lr_ = optimizer.initial_lr().value_or(optimizer.lr());
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

State LRScheduler::state_dict() const {
  State out = {{"last_epoch", scalar_entry<int64_t>(last_epoch_)},
               {"last_lr", scalar_entry<double>(last_lr_)},
               {"base_lr", scalar_entry<double>(base_lr_)}};
  if (const int64_t kind = kind_code(name_); kind != 0)
    out.emplace_back("kind", scalar_entry<int64_t>(kind));
  for (const auto& [name, slot] : slots_)
    out.emplace_back(name, std::visit([](auto* p) { return entry_of(*p); }, slot));
  for (size_t k = 0; k < children_.size(); ++k) {
    for (auto& [name, value] : children_[k]->state_dict())
      out.emplace_back(absl::StrCat(k, ".", name), value);
  }
  return out;
}

struct LRScheduler::ParsedState {
  int64_t epoch = 0;
  double lr = 0;
  std::optional<double> base;                // absent before round 7c
  std::vector<std::optional<Value>> values;  // per slots_ entry; absent before round 8b
  std::vector<ParsedState> children;
};

LRScheduler::ParsedState LRScheduler::parse_state(const State& state) const {
  ParsedState out;
  out.epoch = read_entry<int64_t>(state, "last_epoch", name_);
  out.lr = read_entry<double>(state, "last_lr", name_);
  out.base = read_optional<double>(state, "base_lr", name_);
  std::string known = "last_epoch, last_lr, base_lr, kind";
  std::vector<std::string> present, missing;
  for (const auto& [name, slot] : slots_) {
    absl::StrAppend(&known, ", ", name);
    out.values.push_back(std::visit(
        [&](auto* p) -> std::optional<Value> {
          const auto v = read_optional<std::remove_pointer_t<decltype(p)>>(state, name, name_);
          if (!v) return std::nullopt;
          return Value(*v);
        },
        slot));
    (out.values.back() ? present : missing).push_back(name);
  }
  for (const auto& [key, value] : state) {
    bool found = key == "last_epoch" || key == "last_lr" || key == "base_lr" || key == "kind";
    for (const auto& [name, slot] : slots_) found = found || key == name;
    size_t k = 0;
    const size_t dot = key.find('.');
    found = found || (dot != std::string::npos && absl::SimpleAtoi(key.substr(0, dot), &k) &&
                      k < children_.size());
    DT_CHECK(found,
             "[%s] load_state_dict: entry '%s' names no state of %s (its entries: %s%s); a state "
             "of another scheduler?",
             name_, key, name_, known, children_.empty() ? "" : ", <k>.<entry> of scheduler k");
  }
  // "kind" (from round 8c on) names the scheduler that saved the state.
  if (const std::optional<int64_t> kind = read_optional<int64_t>(state, "kind", name_)) {
    DT_CHECK(*kind == kind_code(name_),
             "[%s] load_state_dict: the state is %s's (entry 'kind' %d), expected %s's", name_,
             kind_name(*kind), *kind, name_);
  }
  // A state from round 8b on carries every registered entry, one from before none: some but
  // not all is another scheduler's state (ExponentialLR's {gamma} in a StepLR).
  DT_CHECK(present.empty() || missing.empty(),
           "[%s] load_state_dict: the state has %s but not %s (%s's state carries all of its "
           "entries, or none before round 8b); a state of another scheduler?",
           name_, absl::StrJoin(present, ", "), absl::StrJoin(missing, ", "), name_);
  for (size_t k = 0; k < children_.size(); ++k)
    out.children.push_back(children_[k]->parse_state(entries_under(state, absl::StrCat(k, "."))));
  return out;
}

void LRScheduler::check_parsed(const ParsedState& parsed) {
  std::vector<Value> own;
  for (const auto& [name, slot] : slots_) own.push_back(value_of(slot));
  auto restore = [&] {
    for (size_t i = 0; i < slots_.size(); ++i) assign(slots_[i].second, own[i]);
  };
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (parsed.values[i]) assign(slots_[i].second, *parsed.values[i]);
  }
  try {
    check_values();
    for (size_t k = 0; k < children_.size(); ++k) children_[k]->check_parsed(parsed.children[k]);
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

void LRScheduler::apply_parsed(const ParsedState& parsed) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (parsed.values[i]) assign(slots_[i].second, *parsed.values[i]);
  }
  for (size_t k = 0; k < children_.size(); ++k) children_[k]->apply_parsed(parsed.children[k]);
  if (parsed.base) base_lr_ = *parsed.base;
  last_epoch_ = parsed.epoch;
  set_lr(parsed.lr);  // last: the composite's learning rate is the one its children left
}

void LRScheduler::load_state_dict(const State& state) {
  // Every entry is read and checked before anything changes: a refused state leaves the
  // schedule as it was.
  const ParsedState parsed = parse_state(state);
  check_parsed(parsed);
  apply_parsed(parsed);
}

void LRScheduler::check_state_dict(const State& state) {
  check_parsed(parse_state(state));
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
  register_state("step_size", &step_size_);
  register_state("gamma", &gamma_);
  check_values();
  initial_step();
}

void StepLR::check_values() const {
  DT_CHECK(step_size_ > 0, "[StepLR] step_size %d, expected > 0", step_size_);
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
  register_state("milestones", &milestones_);
  register_state("gamma", &gamma_);
  initial_step();
}

void MultiStepLR::check_values() const {
  DT_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
           "[MultiStepLR] milestones must be in increasing order");
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
  register_state("factor", &factor_);
  register_state("total_iters", &total_iters_);
  check_values();
  initial_step();
}

void ConstantLR::check_values() const {
  DT_CHECK(factor_ >= 0 && factor_ <= 1, "[ConstantLR] factor %g, expected in [0, 1]", factor_);
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
  register_state("start_factor", &start_factor_);
  register_state("end_factor", &end_factor_);
  register_state("total_iters", &total_iters_);
  check_values();
  initial_step();
}

void LinearLR::check_values() const {
  DT_CHECK(start_factor_ > 0 && start_factor_ <= 1,
           "[LinearLR] start_factor %g, expected in (0, 1]", start_factor_);
  DT_CHECK(end_factor_ >= 0 && end_factor_ <= 1, "[LinearLR] end_factor %g, expected in [0, 1]",
           end_factor_);
  DT_CHECK(total_iters_ > 0, "[LinearLR] total_iters %d, expected > 0", total_iters_);
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
  register_state("gamma", &gamma_);
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
  register_state("total_iters", &total_iters_);
  register_state("power", &power_);
  check_values();
  initial_step();
}

void PolynomialLR::check_values() const {
  DT_CHECK(total_iters_ > 0, "[PolynomialLR] total_iters %d, expected > 0", total_iters_);
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
  register_state("T_max", &t_max_);
  register_state("eta_min", &eta_min_);
  check_values();
  initial_step();
}

void CosineAnnealingLR::check_values() const {
  DT_CHECK(t_max_ > 0, "[CosineAnnealingLR] T_max %d, expected > 0", t_max_);
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
  register_state("milestones", &milestones_);  // PyTorch's _milestones
  check_values();
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

void SequentialLR::check_values() const {
  DT_CHECK(milestones_.size() + 1 == children_.size(),
           "[SequentialLR] %d schedulers and %d milestones, expected one milestone fewer than "
           "schedulers",
           children_.size(), milestones_.size());
  DT_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
           "[SequentialLR] milestones must be in increasing order");
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

// ---- OneCycleLR, CosineAnnealingWarmRestarts, ReduceLROnPlateau -----------------------------

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, const OneCycleLROptions& options)
    : LRScheduler(optimizer, "OneCycleLR", /*set_initial_lr=*/false) {
  const OneCycleLROptions& o = options;
  if (o.total_steps) {
    DT_CHECK(*o.total_steps > 0, "[OneCycleLR] Expected positive integer total_steps, but got %d",
             *o.total_steps);
    total_steps_ = *o.total_steps;
  } else if (o.epochs && o.steps_per_epoch) {
    DT_CHECK(*o.epochs > 0, "[OneCycleLR] Expected positive integer epochs, but got %d", *o.epochs);
    DT_CHECK(*o.steps_per_epoch > 0,
             "[OneCycleLR] Expected positive integer steps_per_epoch, but got %d",
             *o.steps_per_epoch);
    total_steps_ = *o.epochs * *o.steps_per_epoch;
  } else {
    DT_FAIL("[OneCycleLR] You must define either total_steps OR (epochs AND steps_per_epoch)");
  }
  DT_CHECK(o.pct_start >= 0 && o.pct_start <= 1,
           "[OneCycleLR] Expected float between 0 and 1 pct_start, but got %g", o.pct_start);
  DT_CHECK(o.anneal_strategy == "cos" || o.anneal_strategy == "linear",
           "[OneCycleLR] anneal_strategy must be one of 'cos' or 'linear', instead got %s",
           o.anneal_strategy);
  const double n = static_cast<double>(total_steps_);
  end_steps_ = {o.pct_start * n - 1};
  if (o.three_phase) end_steps_.push_back(2 * o.pct_start * n - 2);
  end_steps_.push_back(n - 1);
  anneal_linear_ = o.anneal_strategy == "linear";
  cycle_momentum_ = o.cycle_momentum;
  if (o.cycle_momentum) {
    bool momentum = false;
    for (const auto& [name, v] : optimizer.hyper_parameters()) {
      use_beta1_ = use_beta1_ || name == "beta1";
      momentum = momentum || name == "momentum";
    }
    DT_CHECK(use_beta1_ || momentum,
             "[OneCycleLR] optimizer must support momentum or beta1 with `cycle_momentum` option "
             "enabled");
  }
  // PyTorch sets the param_group's initial_lr, max_lr and min_lr (and the momenta) here.
  initial_lr_ = max_lr / o.div_factor;
  max_lr_ = max_lr;
  min_lr_ = initial_lr_ / o.final_div_factor;
  max_momentum_ = o.max_momentum;
  base_momentum_ = o.base_momentum;
  // The momentum first (the optimizer may refuse it), then initial_lr: a refused constructor
  // leaves the optimizer as it was.
  if (o.cycle_momentum) optimizer.set_hyper_parameters({{momentum_name(), max_momentum_}});
  optimizer.set_initial_lr(initial_lr_);
  base_lr_ = initial_lr_;
  register_state("total_steps", &total_steps_);
  register_state("end_steps", &end_steps_);  // PyTorch's _schedule_phases' end_step
  register_state("anneal_func_type", &anneal_linear_);
  register_state("cycle_momentum", &cycle_momentum_);
  register_state("use_beta1", &use_beta1_);
  register_state("initial_lr", &initial_lr_);
  register_state("max_lr", &max_lr_);
  register_state("min_lr", &min_lr_);
  register_state("max_momentum", &max_momentum_);
  register_state("base_momentum", &base_momentum_);
  initial_step();  // PyTorch's
}

void OneCycleLR::check_values() const {
  DT_CHECK(total_steps_ > 0, "[OneCycleLR] Expected positive integer total_steps, but got %d",
           total_steps_);
  DT_CHECK(end_steps_.size() == 2 || end_steps_.size() == 3,
           "[OneCycleLR] %d phases' end steps, expected 2 (or 3: three_phase)", end_steps_.size());
  DT_CHECK(anneal_linear_ == 0 || anneal_linear_ == 1,
           "[OneCycleLR] anneal_func_type %d, expected 0 (cos) or 1 (linear)", anneal_linear_);
  DT_CHECK((cycle_momentum_ == 0 || cycle_momentum_ == 1) && (use_beta1_ == 0 || use_beta1_ == 1),
           "[OneCycleLR] cycle_momentum %d and use_beta1 %d, expected 0 or 1", cycle_momentum_,
           use_beta1_);
}

void OneCycleLR::step() {
  DT_CHECK(last_epoch_ + 1 <= total_steps_,
           "[OneCycleLR] Tried to step %d times. The specified number of total steps is %d",
           last_epoch_ + 1, total_steps_);
  restart_at(last_epoch_ + 1);
}

void OneCycleLR::restart_at(int64_t epoch) {
  DT_CHECK(epoch <= total_steps_,
           "[OneCycleLR] Tried to step %d times. The specified number of total steps is %d", epoch,
           total_steps_);
  // Both values first, then the momentum (the optimizer checks its hyper-parameters when one is
  // set, and the linear three-phase schedule's last step extrapolates below 0; PyTorch sets it
  // all the same), then the epoch and the learning rate: a refused step changes nothing.
  const double lr = lr_at(epoch);
  if (cycle_momentum_ != 0)
    optimizer_->set_hyper_parameters({{momentum_name(), momentum_at(epoch)}});
  last_epoch_ = epoch;
  set_lr(lr);
}

std::pair<size_t, double> OneCycleLR::phase(int64_t epoch) const {
  const double step = static_cast<double>(epoch);
  double start = 0.0;
  for (size_t i = 0;; ++i) {
    const double end = end_steps_[i];
    if (step <= end || i + 1 == end_steps_.size()) return {i, (step - start) / (end - start)};
    start = end;
  }
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (anneal_linear_ != 0) return (end - start) * pct + start;
  const double cos_out = std::cos(std::numbers::pi * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

double OneCycleLR::get_lr(bool) const {
  return lr_at(last_epoch_);
}

double OneCycleLR::lr_at(int64_t epoch) const {
  const auto [k, pct] = phase(epoch);
  // Phase k anneals from lrs[k] to lrs[k + 1].
  const std::vector<double> lrs = end_steps_.size() == 3
                                      ? std::vector{initial_lr_, max_lr_, initial_lr_, min_lr_}
                                      : std::vector{initial_lr_, max_lr_, min_lr_};
  return anneal(lrs[k], lrs[k + 1], pct);
}

double OneCycleLR::momentum_at(int64_t epoch) const {
  const auto [k, pct] = phase(epoch);
  const std::vector<double> m =
      end_steps_.size() == 3
          ? std::vector{max_momentum_, base_momentum_, max_momentum_, max_momentum_}
          : std::vector{max_momentum_, base_momentum_, max_momentum_};
  return anneal(m[k], m[k + 1], pct);
}

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0,
                                                         int64_t T_mult, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingWarmRestarts"),
      t_0_(T_0),
      t_i_(T_0),
      t_mult_(T_mult),
      eta_min_(eta_min) {
  DT_CHECK(T_0 > 0, "[CosineAnnealingWarmRestarts] Expected positive integer T_0, but got %d", T_0);
  DT_CHECK(T_mult >= 1, "[CosineAnnealingWarmRestarts] Expected integer T_mult >= 1, but got %d",
           T_mult);
  register_state("T_0", &t_0_);
  register_state("T_i", &t_i_);
  register_state("T_mult", &t_mult_);
  register_state("eta_min", &eta_min_);
  register_state("T_cur", &t_cur_);
  t_cur_ = 0;  // PyTorch's first step, at epoch 0
  initial_step();
}

void CosineAnnealingWarmRestarts::check_values() const {
  DT_CHECK(t_0_ > 0 && t_i_ > 0,
           "[CosineAnnealingWarmRestarts] Expected positive integer T_0, but got %d (T_i %d)", t_0_,
           t_i_);
  DT_CHECK(t_mult_ >= 1, "[CosineAnnealingWarmRestarts] Expected integer T_mult >= 1, but got %d",
           t_mult_);
  DT_CHECK(t_cur_ >= 0 && t_cur_ < t_i_,
           "[CosineAnnealingWarmRestarts] T_cur %d, expected in [0, %d)", t_cur_, t_i_);
}

void CosineAnnealingWarmRestarts::step() {
  if (++t_cur_ >= t_i_) {
    t_cur_ %= t_i_;
    t_i_ *= t_mult_;
  }
  LRScheduler::step();
}

void CosineAnnealingWarmRestarts::restart_at(int64_t epoch) {
  // PyTorch's step(epoch) for an integer epoch: the cycle holding it.
  t_i_ = t_0_;
  t_cur_ = epoch;
  while (t_cur_ >= t_i_) {
    t_cur_ -= t_i_;
    t_i_ *= t_mult_;
  }
  LRScheduler::restart_at(epoch);
}

double CosineAnnealingWarmRestarts::get_lr(bool) const {
  return eta_min_ + (base_lr_ - eta_min_) *
                        (1 + std::cos(std::numbers::pi * static_cast<double>(t_cur_) /
                                      static_cast<double>(t_i_))) /
                        2;
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const std::string& mode, double factor,
                                     int64_t patience, double threshold,
                                     const std::string& threshold_mode, int64_t cooldown,
                                     double min_lr, double eps)
    : LRScheduler(optimizer, "ReduceLROnPlateau", /*set_initial_lr=*/false),
      factor_(factor),
      threshold_(threshold),
      min_lr_(min_lr),
      eps_(eps),
      patience_(patience),
      cooldown_(cooldown) {
  DT_CHECK(factor < 1.0, "[ReduceLROnPlateau] Factor should be < 1.0. (got %g)", factor);
  DT_CHECK(mode == "min" || mode == "max", "[ReduceLROnPlateau] mode %s is unknown!", mode);
  DT_CHECK(threshold_mode == "rel" || threshold_mode == "abs",
           "[ReduceLROnPlateau] threshold mode %s is unknown!", threshold_mode);
  mode_max_ = mode == "max";
  threshold_abs_ = threshold_mode == "abs";
  // PyTorch's mode_worse.
  best_ = mode_max_ != 0 ? -std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::infinity();
  register_state("factor", &factor_);
  register_state("min_lr", &min_lr_);  // PyTorch's min_lrs, one per param group
  register_state("patience", &patience_);
  register_state("cooldown", &cooldown_);
  register_state("cooldown_counter", &cooldown_counter_);
  register_state("mode", &mode_max_);
  register_state("threshold", &threshold_);
  register_state("threshold_mode", &threshold_abs_);
  register_state("best", &best_);
  register_state("num_bad_epochs", &num_bad_epochs_);
  register_state("eps", &eps_);
  last_epoch_ = 0;
  last_lr_ = optimizer.lr();
}

void ReduceLROnPlateau::check_values() const {
  DT_CHECK(factor_ < 1.0, "[ReduceLROnPlateau] Factor should be < 1.0. (got %g)", factor_);
  DT_CHECK(mode_max_ == 0 || mode_max_ == 1,
           "[ReduceLROnPlateau] mode %d, expected 0 (min) or 1 (max)", mode_max_);
  DT_CHECK(threshold_abs_ == 0 || threshold_abs_ == 1,
           "[ReduceLROnPlateau] threshold_mode %d, expected 0 (rel) or 1 (abs)", threshold_abs_);
}

bool ReduceLROnPlateau::is_better(double a) const {
  if (mode_max_ == 0)
    return threshold_abs_ != 0 ? a < best_ - threshold_ : a < best_ * (1.0 - threshold_);
  return threshold_abs_ != 0 ? a > best_ + threshold_ : a > best_ * (threshold_ + 1.0);
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {  // bad steps in the cooldown do not count
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > patience_) {
    const double old_lr = current_lr();
    const double new_lr = std::max(old_lr * factor_, min_lr_);
    if (old_lr - new_lr > eps_) optimizer_->set_lr(new_lr);
    cooldown_counter_ = cooldown_;
    num_bad_epochs_ = 0;
  }
  last_lr_ = current_lr();
}

void ReduceLROnPlateau::step() {
  DT_FAIL("[ReduceLROnPlateau] step() needs the metric: call step(metric)");
}

double ReduceLROnPlateau::get_lr(bool) const {
  return current_lr();
}

void ReduceLROnPlateau::restart_at(int64_t) {
  DT_FAIL("[ReduceLROnPlateau] cannot be restarted at an epoch (it steps on a metric)");
}

}  // namespace dtensor::optim
