#include "dtensor/optim/optimizer.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>

#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/optim/detail/optim_kernels.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor::optim {
namespace {

// The local shard of a DTensor, checked to be the contiguous whole of its storage view the
// kernels expect (parameters, grads and states are created contiguous).
Tensor shard(const DTensor& t) {
  const Tensor& local = t.to_local();
  DT_CHECK(local.is_contiguous(), "[optim] internal error: a non-contiguous local shard %s",
           t.str());
  return local;
}

// The prefix of the hyper-parameter entries of state_dict (PyTorch's param_groups).
constexpr char kGroup[] = "param_groups.";
constexpr size_t kGroupLen = sizeof(kGroup) - 1;

bool is_group_entry(const std::string& name) {
  return name.compare(0, kGroupLen, kGroup) == 0;
}

DTensor step_tensor(int64_t steps) {
  return local_dtensor(full({1}, steps, TensorOptions(DType::kInt64)));
}

int64_t read_step(const std::vector<std::pair<std::string, DTensor>>& state, const char* op) {
  for (const auto& [name, value] : state) {
    if (name == "step") return value.to_local().to(Device(kCPU)).data<int64_t>()[0];
  }
  DT_FAIL("[%s] load_state_dict: no 'step' entry", op);
}

// An entry "<i>.<slot>" of a state: parameter index and slot name; nullopt for other names
// ("step", "param_groups.<name>"). Throws "[<op>] load_state_dict: ..." for an index that is not a
// number or names no parameter.
std::optional<std::pair<size_t, std::string>> parameter_entry(const std::string& name,
                                                              size_t num_params, const char* op) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos || is_group_entry(name)) return std::nullopt;
  size_t i = 0;
  DT_CHECK(absl::SimpleAtoi(name.substr(0, dot), &i) && i < num_params,
           "[%s] load_state_dict: entry '%s' names no parameter (expected '<i>.<state>' with i < "
           "%d)",
           op, name, num_params);
  return std::pair{i, name.substr(dot + 1)};
}

// Loads entries "<i>.<slot>" into slots[i] (checked by load_state_dict before).
void load_slots(const std::vector<std::pair<std::string, DTensor>>& state, const std::string& slot,
                const std::vector<DTensor>& params, std::vector<DTensor>& slots, const char* op) {
  // A slot that exists is overwritten in place (a compiled step keeps updating that tensor);
  // one the state does not name is dropped, one that does not exist yet is made.
  std::vector<DTensor> old = std::move(slots);
  old.resize(params.size());
  slots.assign(params.size(), DTensor());
  for (const auto& [name, value] : state) {
    const auto entry = parameter_entry(name, params.size(), op);
    if (!entry || entry->second != slot) continue;
    const size_t i = entry->first;
    if (old[i].defined() && old[i].spec() == value.spec()) {
      Tensor(old[i].to_local()).copy_(value.to_local());
      slots[i] = std::move(old[i]);
    } else {
      slots[i] = DTensor(value.to_local().clone(), params[i].spec_ptr());
    }
  }
}

// A captured update (dtensor/compile/) keeps the state tensors it was recorded with. A load or a
// hyper-parameter change that switched a state on or off (momentum from or to 0, amsgrad) or
// dropped or replaced a slot (a loaded state without it, another spec) leaves it updating tensors
// the optimizer no longer holds, or missing one it needs: raise instead. In eager steps the
// update runs right after reading the slots, so this always holds there.
void check_recorded_slot(const std::vector<DTensor>& slots, size_t i, const Tensor& recorded,
                         bool wanted, const char* op, const char* slot) {
  const bool same = recorded.defined() == wanted &&
                    (!wanted || (i < slots.size() && slots[i].defined() &&
                                 slots[i].to_local().data_ptr() == recorded.data_ptr()));
  DT_CHECK(same,
           "[%s] the '%s' state of parameter %d changed since this update was recorded by a "
           "compiled step (load_state_dict or a hyper-parameter switched it on or off, or replaced "
           "it): compile the step again",
           op, slot, i);
}

void save_slots(std::vector<std::pair<std::string, DTensor>>& out, const std::string& slot,
                const std::vector<DTensor>& slots) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].defined()) out.emplace_back(absl::StrCat(i, ".", slot), slots[i]);
  }
}

// A bool hyper-parameter from its state_dict value (0 or 1).
bool flag(const std::string& name, double v, const char* op) {
  DT_CHECK(v == 0 || v == 1, "[%s] hyper-parameter '%s' is a bool: expected 0 or 1, got %g", op,
           name, v);
  return v == 1;
}

// A hyper-parameter of an options struct O: its state_dict name, getter and setter (a bool
// as 0 or 1). The tables below list each optimizer's, so that state_dict and load_state_dict
// read and write the same names.
template <typename O>
struct Hyper {
  const char* name;
  double (*get)(const O&);
  void (*set)(O&, double, const char* op);
};

// clang-format off
#define DT_HYPER(O, n)                                                          \
  Hyper<O>{#n, [](const O& o) { return static_cast<double>(o.n()); },          \
           [](O& o, double v, const char* op) {                                \
             if constexpr (std::is_same_v<decltype(o.n()), bool>) {            \
               o.n(flag(#n, v, op));                                           \
             } else {                                                          \
               o.n(v);                                                         \
             }                                                                 \
           }}
// clang-format on

// Each optimizer's table, in PyTorch's param_group order.
const std::vector<Hyper<SGDOptions>>& hypers(const SGDOptions&) {
  static const std::vector<Hyper<SGDOptions>> t = {
      DT_HYPER(SGDOptions, lr),        DT_HYPER(SGDOptions, momentum),
      DT_HYPER(SGDOptions, dampening), DT_HYPER(SGDOptions, weight_decay),
      DT_HYPER(SGDOptions, nesterov),  DT_HYPER(SGDOptions, maximize)};
  return t;
}

const std::vector<Hyper<AdamWOptions>>& hypers(const AdamWOptions&) {
  static const std::vector<Hyper<AdamWOptions>> t = {
      DT_HYPER(AdamWOptions, lr),           DT_HYPER(AdamWOptions, beta1),
      DT_HYPER(AdamWOptions, beta2),        DT_HYPER(AdamWOptions, eps),
      DT_HYPER(AdamWOptions, weight_decay), DT_HYPER(AdamWOptions, amsgrad),
      DT_HYPER(AdamWOptions, maximize),     DT_HYPER(AdamWOptions, decoupled_weight_decay)};
  return t;
}

const std::vector<Hyper<AdamOptions>>& hypers(const AdamOptions&) {
  static const std::vector<Hyper<AdamOptions>> t = {
      DT_HYPER(AdamOptions, lr),           DT_HYPER(AdamOptions, beta1),
      DT_HYPER(AdamOptions, beta2),        DT_HYPER(AdamOptions, eps),
      DT_HYPER(AdamOptions, weight_decay), DT_HYPER(AdamOptions, amsgrad),
      DT_HYPER(AdamOptions, maximize),     DT_HYPER(AdamOptions, decoupled_weight_decay)};
  return t;
}

const std::vector<Hyper<RMSpropOptions>>& hypers(const RMSpropOptions&) {
  static const std::vector<Hyper<RMSpropOptions>> t = {
      DT_HYPER(RMSpropOptions, lr),       DT_HYPER(RMSpropOptions, alpha),
      DT_HYPER(RMSpropOptions, eps),      DT_HYPER(RMSpropOptions, weight_decay),
      DT_HYPER(RMSpropOptions, momentum), DT_HYPER(RMSpropOptions, centered),
      DT_HYPER(RMSpropOptions, maximize)};
  return t;
}

const std::vector<Hyper<AdagradOptions>>& hypers(const AdagradOptions&) {
  static const std::vector<Hyper<AdagradOptions>> t = {
      DT_HYPER(AdagradOptions, lr),           DT_HYPER(AdagradOptions, lr_decay),
      DT_HYPER(AdagradOptions, weight_decay), DT_HYPER(AdagradOptions, initial_accumulator_value),
      DT_HYPER(AdagradOptions, eps),          DT_HYPER(AdagradOptions, maximize)};
  return t;
}

#undef DT_HYPER

// `o` with `values` set: "[<op>] has no hyper-parameter ..." for a name the table lacks.
template <typename O>
O with_values(O o, const std::vector<std::pair<std::string, double>>& values, const char* op) {
  const std::vector<Hyper<O>>& table = hypers(o);
  for (const auto& [name, v] : values) {
    const auto it =
        std::find_if(table.begin(), table.end(), [&](const Hyper<O>& h) { return name == h.name; });
    if (it != table.end()) {
      it->set(o, v, op);
      continue;
    }
    std::string names;
    for (const Hyper<O>& h : table) absl::StrAppend(&names, names.empty() ? "" : ", ", h.name);
    DT_FAIL("[%s] has no hyper-parameter '%s' (its hyper-parameters: %s)", op, name, names);
  }
  return o;
}

// The constructors' checks. PyTorch's SGD refuses the same values ("Invalid ... value").
void check_options(const SGDOptions& o, const char*) {
  DT_CHECK(o.lr() >= 0, "[SGD] lr must be >= 0, got %g", o.lr());
  DT_CHECK(o.momentum() >= 0, "[SGD] momentum must be >= 0, got %g", o.momentum());
  DT_CHECK(o.weight_decay() >= 0, "[SGD] weight_decay must be >= 0, got %g", o.weight_decay());
  DT_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0),
           "[SGD] nesterov needs momentum > 0 and dampening 0 (got %g, %g)", o.momentum(),
           o.dampening());
}

// PyTorch's checks of Adam, AdamW, RMSprop and Adagrad ("Invalid learning rate: -1"): a value
// that must be >= 0 (NaN fails) or in [0, 1).
void check_nonnegative(const char* op, const char* name, double v) {
  DT_CHECK(v >= 0, "[%s] invalid %s: %g (expected >= 0)", op, name, v);
}

void check_beta(const char* op, const char* name, double v) {
  DT_CHECK(v >= 0 && v < 1, "[%s] invalid %s: %g (expected 0 <= %s < 1)", op, name, v, name);
}

void check_options(const AdamOptions& o, const char* op) {
  check_nonnegative(op, "lr", o.lr());
  check_nonnegative(op, "eps", o.eps());
  check_beta(op, "beta1", o.beta1());
  check_beta(op, "beta2", o.beta2());
  check_nonnegative(op, "weight_decay", o.weight_decay());
}

// AdamW's options as Adam's (decoupled weight decay unless set to false).
AdamOptions as_adam(const AdamWOptions& o) {
  return AdamOptions(o.lr())
      .beta1(o.beta1())
      .beta2(o.beta2())
      .eps(o.eps())
      .weight_decay(o.weight_decay())
      .amsgrad(o.amsgrad())
      .maximize(o.maximize())
      .decoupled_weight_decay(o.decoupled_weight_decay());
}

void check_options(const AdamWOptions& o, const char* op) {
  check_options(as_adam(o), op);
}

void check_options(const RMSpropOptions& o, const char* op) {
  check_nonnegative(op, "lr", o.lr());
  check_nonnegative(op, "eps", o.eps());
  check_nonnegative(op, "momentum", o.momentum());
  check_nonnegative(op, "weight_decay", o.weight_decay());
  check_nonnegative(op, "alpha", o.alpha());
}

void check_options(const AdagradOptions& o, const char* op) {
  check_nonnegative(op, "lr", o.lr());
  check_nonnegative(op, "lr_decay", o.lr_decay());
  check_nonnegative(op, "weight_decay", o.weight_decay());
  check_nonnegative(op, "initial_accumulator_value", o.initial_accumulator_value());
  check_nonnegative(op, "eps", o.eps());
}

using Values = std::vector<std::pair<std::string, double>>;

// `o` with `values` set, checked as the constructor checks it: set_hyper_parameters assigns
// it, check_hyper_parameters only checks. "[<op>] ..." for an unknown name or an invalid value.
template <typename O>
O checked(O o, const Values& values, const char* op) {
  o = with_values(o, values, op);
  check_options(o, op);
  return o;
}

// The scalars of update number `steps` (bias corrections from the step count).
detail::AdamWStep adamw_scalars(const AdamOptions& o, int64_t steps) {
  const double t = static_cast<double>(steps);
  return {o.lr(),
          o.beta1(),
          o.beta2(),
          o.eps(),
          o.weight_decay(),
          1.0 - std::pow(o.beta1(), t),
          1.0 - std::pow(o.beta2(), t),
          o.amsgrad(),
          o.maximize(),
          o.decoupled_weight_decay()};
}

}  // namespace

template <typename O, typename Base>
OptimizerWith<O, Base>::OptimizerWith(std::vector<DTensor> params, std::string_view name, O options)
    : Base(std::move(params), name), options_(options) {
  check_options(options_, this->name_.c_str());
}

template <typename O, typename Base>
Values OptimizerWith<O, Base>::hyper_parameters() const {
  Values out;
  for (const Hyper<O>& h : hypers(options_)) out.emplace_back(h.name, h.get(options_));
  return out;
}

template <typename O, typename Base>
void OptimizerWith<O, Base>::set_hyper_parameters(const Values& values) {
  options_ = checked(options_, values, this->name_.c_str());
}

template <typename O, typename Base>
void OptimizerWith<O, Base>::check_hyper_parameters(const Values& values) const {
  static_cast<void>(checked(options_, values, this->name_.c_str()));
}

template class OptimizerWith<SGDOptions>;
template class OptimizerWith<AdamOptions, AdamBase>;
template class OptimizerWith<AdamWOptions, AdamBase>;
template class OptimizerWith<RMSpropOptions>;
template class OptimizerWith<AdagradOptions>;

Optimizer::Optimizer(std::vector<DTensor> params, std::string_view name)
    : params_(std::move(params)), name_(name) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const DTensor& p = params_[i];
    DT_CHECK(p.defined(), "[%s] parameter %d is undefined", name, i);
    DT_CHECK(is_floating(p.dtype()), "[%s] parameter %d has dtype %s, expected a floating one",
             name, i, dtype_name(p.dtype()));
    DT_CHECK(!p.spec().has_partial(),
             "[%s] parameter %d has Partial placements %s: an update of a partial value is not "
             "the partial of the update (reduce it first)",
             name, i, placements_str(p.placements()));
  }
}

void Optimizer::replace_parameters(std::vector<DTensor> params) {
  DT_CHECK(params.size() == params_.size(),
           "[optimizer] replace_parameters: %d parameters given for the %d the optimizer holds",
           params.size(), params_.size());
  bool has_state = false;
  for (const auto& [name, slots] : state_slots_) {
    for (const DTensor& s : *slots) has_state = has_state || s.defined();
  }
  DT_CHECK(steps_ == 0 && !has_state,
           "[optimizer] replace_parameters: the optimizer has state already (a step taken or "
           "state loaded); replace its parameters before the first step");
  for (size_t i = 0; i < params.size(); ++i) {
    DT_CHECK(params[i].defined() && params[i].shape() == params_[i].shape() &&
                 params[i].dtype() == params_[i].dtype() && !params[i].spec().has_partial(),
             "[optimizer] replace_parameters: parameter %d is %s, expected the global shape %s "
             "and dtype %s of the one it replaces, not Partial",
             i, params[i].defined() ? params[i].str() : std::string("undefined"),
             shape_str(params_[i].shape()), dtype_name(params_[i].dtype()));
  }
  params_ = std::move(params);
}

void Optimizer::register_state(std::string name, std::vector<DTensor>* slots) {
  state_slots_.emplace_back(std::move(name), slots);
}

std::vector<std::pair<std::string, DTensor>> Optimizer::state_dict() const {
  std::vector<std::pair<std::string, DTensor>> out = {{"step", step_tensor(steps_)}};
  for (const auto& [name, slots] : state_slots_) save_slots(out, name, *slots);
  for (size_t i = 0; i < param_steps_.size(); ++i) {
    if (param_steps_[i] > 0)
      out.emplace_back(absl::StrCat(i, ".step"), step_tensor(param_steps_[i]));
  }
  auto scalar = [](double v) { return local_dtensor(from_vector(std::vector<double>{v}, {1})); };
  for (const auto& [name, v] : hyper_parameters())
    out.emplace_back(absl::StrCat(kGroup, name), scalar(v));
  if (initial_lr_) out.emplace_back(absl::StrCat(kGroup, "initial_lr"), scalar(*initial_lr_));
  return out;
}

struct Optimizer::ParsedState {
  int64_t steps = 0;
  // Per parameter: its own count ("<i>.step", -1 when absent) and whether a slot is loaded.
  std::vector<int64_t> counts;
  std::vector<bool> has_state;
  std::vector<std::pair<std::string, double>> group;  // "param_groups.<name>", without the prefix
  std::optional<double> initial_lr;
};

Optimizer::ParsedState Optimizer::parse_state(
    const std::vector<std::pair<std::string, DTensor>>& state) const {
  const char* op = name_.c_str();
  ParsedState out;
  out.steps = read_step(state, op);
  out.counts.assign(params_.size(), -1);
  out.has_state.assign(params_.size(), false);
  out.initial_lr = initial_lr_;
  for (const auto& [name, value] : state) {
    if (is_group_entry(name)) {
      DT_CHECK(value.numel() == 1 && value.dtype() == DType::kFloat64,
               "[%s] load_state_dict: entry '%s' is %s, expected a 1-element float64 "
               "hyper-parameter",
               op, name, value.str());
      const double v = value.to_local().to(Device(kCPU)).data<double>()[0];
      if (name == absl::StrCat(kGroup, "initial_lr")) {
        out.initial_lr = v;
      } else {
        out.group.emplace_back(name.substr(kGroupLen), v);
      }
      continue;
    }
    const auto entry = parameter_entry(name, params_.size(), op);
    if (!entry) continue;
    const auto& [i, slot] = *entry;
    if (slot == "step" && !param_steps_.empty()) {
      DT_CHECK(value.numel() == 1 && value.dtype() == DType::kInt64,
               "[%s] load_state_dict: entry '%s' is %s, expected a 1-element int64 step count", op,
               name, value.str());
      out.counts[i] = value.to_local().to(Device(kCPU)).data<int64_t>()[0];
      continue;
    }
    bool known = false;
    std::string known_slots;
    for (const auto& [registered, slots] : state_slots_) {
      absl::StrAppend(&known_slots, known_slots.empty() ? "" : ", ", registered);
      if (slot != registered) continue;
      DT_CHECK(value.spec() == params_[i].spec(),
               "[%s] load_state_dict: entry '%s' is %s, expected the spec of parameter %d (%s)", op,
               name, value.spec().str(), i, params_[i].spec().str());
      out.has_state[i] = known = true;
    }
    DT_CHECK(known,
             "[%s] load_state_dict: entry '%s' names no state of %s (its per-parameter states: "
             "%s%s); a state of another optimizer?",
             op, name, op, known_slots, param_steps_.empty() ? "" : ", step");
  }
  return out;
}

void Optimizer::check_state_dict(const std::vector<std::pair<std::string, DTensor>>& state) const {
  const ParsedState parsed = parse_state(state);
  check_hyper_parameters(parsed.group);
}

void Optimizer::check_hyper_parameters(
    const std::vector<std::pair<std::string, double>>& values) const {
  const auto known = hyper_parameters();
  for (const auto& [name, v] : values) {
    std::string names;
    bool found = false;
    for (const auto& [k, unused] : known) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", k);
      found = found || k == name;
    }
    DT_CHECK(found, "[%s] has no hyper-parameter '%s' (its hyper-parameters: %s)", name_, name,
             names.empty() ? "none" : names);
  }
}

void Optimizer::load_state_dict(const std::vector<std::pair<std::string, DTensor>>& state) {
  // Every entry is checked before anything changes, so a refused state leaves the optimizer as
  // it was.
  ParsedState parsed = parse_state(state);
  // Checks the hyper-parameters and sets them, or raises with none changed.
  set_hyper_parameters(parsed.group);
  loaded();
  initial_lr_ = parsed.initial_lr;
  steps_ = parsed.steps;
  for (const auto& [name, slots] : state_slots_)
    load_slots(state, name, params_, *slots, name_.c_str());
  if (param_steps_.empty()) return;
  // A state saved before the per-parameter counts existed ("<i>.step" absent) gives a
  // parameter that has state the global count, which is what its updates used then.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (parsed.counts[i] < 0) parsed.counts[i] = parsed.has_state[i] ? steps_ : 0;
  }
  param_steps_ = std::move(parsed.counts);
}

double Optimizer::lr() const {
  DT_FAIL("[%s] has no learning rate (override Optimizer::lr and set_lr to use a scheduler)",
          name_);
}

void Optimizer::set_lr(double) {
  static_cast<void>(lr());
}

void Optimizer::set_hyper_parameters(const std::vector<std::pair<std::string, double>>& values) {
  if (!values.empty())
    DT_FAIL("[%s] has no hyper-parameter '%s' (it has none)", name_, values[0].first);
}

void Optimizer::zero_grad(bool set_to_none) {
  autograd::zero_grad(params_, set_to_none);
}

DTensor& Optimizer::state(std::vector<DTensor>& slots, size_t i, double init) {
  if (slots.size() != params_.size()) slots.resize(params_.size());
  if (!slots[i].defined()) {
    slots[i] = zeros_like(params_[i].detach());
    if (init != 0) Tensor(slots[i].to_local()).fill_(Scalar(init));
    // Made lazily, possibly while a step is captured: state that replay keeps updating.
    dtensor::detail::keep_in_capture(slots[i].to_local());
  }
  return slots[i];
}

SGD::SGD(std::vector<DTensor> params, SGDOptions options)
    : OptimizerWith(std::move(params), "SGD", options) {
  register_state("momentum_buffer", &momentum_);
}

// The step counter and each update run through detail::run_recorded, so that a captured step
// (dtensor/compile/) replays them: the hyper-parameters and the step count are read when the
// update runs, not when it was captured (they are the step's runtime scalars).
void Optimizer::update_each(
    absl::FunctionRef<void(size_t i, const DTensor& p, const DTensor& g)> update) {
  autograd::NoGradGuard no_grad;
  dtensor::detail::run_recorded("optim", "step_count", {}, {}, 0,
                                [this, alive = std::weak_ptr<const char>(alive_)](
                                    absl::Span<const Tensor>, absl::Span<Tensor>) {
                                  dtensor::detail::check_alive(alive, "an optimizer's step count");
                                  ++steps_;
                                });
  for (size_t i = 0; i < params_.size(); ++i) {
    const DTensor& p = params_[i];
    const DTensor& g = p.grad();
    if (!g.defined()) continue;
    update(i, p, g);
  }
}

void SGD::step() {
  update_each([this](size_t i, const DTensor& p, const DTensor& g) {
    // Only the first update of a momentum buffer starts it from the gradient.
    auto first = std::make_shared<bool>(momentum_.size() <= i || !momentum_[i].defined());
    const Tensor buf = options_.momentum() != 0 ? shard(state(momentum_, i)) : Tensor();
    const Tensor ins[] = {shard(p), shard(g), buf};
    dtensor::detail::run_recorded(
        "optim", "sgd_update", ins, {}, 0b101,
        [this, i, first, alive = std::weak_ptr<const char>(alive_)](absl::Span<const Tensor> in,
                                                                    absl::Span<Tensor>) {
          dtensor::detail::check_alive(alive, "an SGD update");
          check_recorded_slot(momentum_, i, in[2], options_.momentum() != 0, "SGD",
                              "momentum_buffer");
          in[0].storage().bump_version();  // see update_each
          detail::sgd_update(
              in[0], in[1], in[2],
              {options_.lr(), options_.momentum(), options_.dampening(), options_.weight_decay(),
               options_.nesterov(), *first, options_.maximize()});
          *first = false;
        });
  });
}

AdamBase::AdamBase(std::vector<DTensor> params, std::string_view name)
    : Optimizer(std::move(params), name) {
  register_state("exp_avg", &exp_avg_);
  register_state("exp_avg_sq", &exp_avg_sq_);
  register_state("max_exp_avg_sq", &max_exp_avg_sq_);
  count_parameter_steps();
}

void AdamBase::step() {
  // "adam_update", "adamw_update": the recorded op names the optimizer.
  const std::string kernel = name_ == "AdamW" ? "adamw_update" : "adam_update";
  update_each([this, &kernel](size_t i, const DTensor& p, const DTensor& g) {
    const Tensor vmax = adam_options().amsgrad() ? shard(state(max_exp_avg_sq_, i)) : Tensor();
    const Tensor ins[] = {shard(p), shard(g), shard(state(exp_avg_, i)),
                          shard(state(exp_avg_sq_, i)), vmax};
    dtensor::detail::run_recorded(
        "optim", kernel, ins, {}, 0b11101,
        [this, i, alive = std::weak_ptr<const char>(alive_)](absl::Span<const Tensor> in,
                                                             absl::Span<Tensor>) {
          dtensor::detail::check_alive(alive, absl::StrCat("an ", name_, " update"));
          const AdamOptions o = adam_options();
          const char* op = name_.c_str();
          check_recorded_slot(exp_avg_, i, in[2], true, op, "exp_avg");
          check_recorded_slot(exp_avg_sq_, i, in[3], true, op, "exp_avg_sq");
          check_recorded_slot(max_exp_avg_sq_, i, in[4], o.amsgrad(), op, "max_exp_avg_sq");
          in[0].storage().bump_version();  // see update_each
          const int64_t t = ++param_steps_[i];
          detail::adamw_update(in[0], in[1], in[2], in[3], in[4], adamw_scalars(o, t));
        });
  });
}

Adam::Adam(std::vector<DTensor> params, AdamOptions options)
    : OptimizerWith(std::move(params), "Adam", options) {}

AdamW::AdamW(std::vector<DTensor> params, AdamWOptions options)
    : OptimizerWith(std::move(params), "AdamW", options) {}

AdamOptions AdamW::adam_options() const {
  return as_adam(options_);
}

RMSprop::RMSprop(std::vector<DTensor> params, RMSpropOptions options)
    : OptimizerWith(std::move(params), "RMSprop", options) {
  register_state("square_avg", &square_avg_);
  register_state("momentum_buffer", &momentum_buffer_);
  register_state("grad_avg", &grad_avg_);
  count_parameter_steps();
}

void RMSprop::step() {
  update_each([this](size_t i, const DTensor& p, const DTensor& g) {
    const Tensor buf = options_.momentum() > 0 ? shard(state(momentum_buffer_, i)) : Tensor();
    const Tensor gavg = options_.centered() ? shard(state(grad_avg_, i)) : Tensor();
    const Tensor ins[] = {shard(p), shard(g), shard(state(square_avg_, i)), buf, gavg};
    dtensor::detail::run_recorded(
        "optim", "rmsprop_update", ins, {}, 0b11101,
        [this, i, alive = std::weak_ptr<const char>(alive_)](absl::Span<const Tensor> in,
                                                             absl::Span<Tensor>) {
          dtensor::detail::check_alive(alive, "an RMSprop update");
          const RMSpropOptions& o = options_;
          check_recorded_slot(square_avg_, i, in[2], true, "RMSprop", "square_avg");
          check_recorded_slot(momentum_buffer_, i, in[3], o.momentum() > 0, "RMSprop",
                              "momentum_buffer");
          check_recorded_slot(grad_avg_, i, in[4], o.centered(), "RMSprop", "grad_avg");
          in[0].storage().bump_version();  // see update_each
          ++param_steps_[i];
          detail::rmsprop_update(in[0], in[1], in[2], in[3], in[4],
                                 {o.lr(), o.alpha(), o.eps(), o.weight_decay(), o.momentum(),
                                  o.centered(), o.maximize()});
        });
  });
}

Adagrad::Adagrad(std::vector<DTensor> params, AdagradOptions options)
    : OptimizerWith(std::move(params), "Adagrad", options) {
  register_state("sum", &sum_);
  count_parameter_steps();
}

void Adagrad::step() {
  update_each([this](size_t i, const DTensor& p, const DTensor& g) {
    // PyTorch fills sum with initial_accumulator_value in its constructor; here on first use.
    const Tensor ins[] = {shard(p), shard(g),
                          shard(state(sum_, i, options_.initial_accumulator_value()))};
    dtensor::detail::run_recorded(
        "optim", "adagrad_update", ins, {}, 0b101,
        [this, i, alive = std::weak_ptr<const char>(alive_)](absl::Span<const Tensor> in,
                                                             absl::Span<Tensor>) {
          dtensor::detail::check_alive(alive, "an Adagrad update");
          const AdagradOptions& o = options_;
          check_recorded_slot(sum_, i, in[2], true, "Adagrad", "sum");
          in[0].storage().bump_version();  // see update_each
          const int64_t t = ++param_steps_[i];
          const double clr = o.lr() / (1.0 + static_cast<double>(t - 1) * o.lr_decay());
          detail::adagrad_update(in[0], in[1], in[2],
                                 {clr, o.eps(), o.weight_decay(), o.maximize()});
        });
  });
}

}  // namespace dtensor::optim
