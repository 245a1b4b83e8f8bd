#include "dtensor/nn/module.h"

#include <absl/container/flat_hash_set.h>

#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/function.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/nn/functional.h"
#include "dtensor/nn/two_input_module.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {

DTensor Module::forward(const DTensor&) {
  DT_FAIL("[Module] %s has no single-input forward (call its submodules instead)", type_name());
}

DTensor Module::operator()(const DTensor& x) {
  if (stand_in_ != nullptr) return (*stand_in_)(x);
  // CommDebugMode attribution: a root module shows its type name.
  std::optional<CommDebugMode::ModuleScope> label;
  if (CommDebugMode::active()) label.emplace(name_.empty() ? type_name() : name_);
  DTensor in = x;
  for (auto& h : pre_hooks_) in = h(*this, in);
  const bool backward_hooks =
      (!backward_pre_hooks_.empty() || !backward_hooks_.empty()) && autograd::grad_enabled();
  // This call's grad_output, from the output's node to the input's (PyTorch's BackwardHook).
  auto grad_output = backward_hooks ? std::make_shared<DTensor>() : nullptr;
  const bool input_hooked = backward_hooks && in.requires_grad();
  if (input_hooked) {
    const DTensor* ins[] = {&in};
    in = autograd::record_function("BackwardHookFunctionBackward", ins, in.detach(),
                                   [this, grad_output](absl::Span<const DTensor> g) -> DTensorList {
                                     // No gradient reached the output (or its node did not run):
                                     // the hooks do not fire.
                                     if (!grad_output->defined()) return {g[0]};
                                     DTensor grad_input = g[0];
                                     for (const BackwardHook& h : backward_hooks_) {
                                       DTensor replaced = h(*this, grad_input, *grad_output);
                                       if (replaced.defined()) grad_input = std::move(replaced);
                                     }
                                     *grad_output = DTensor();
                                     return {grad_input};
                                   });
  }
  DTensor out = forward_wrapper_ != nullptr ? forward_wrapper_(*this, in) : forward(in);
  for (auto& h : hooks_) out = h(*this, std::move(out));
  if (backward_hooks && out.requires_grad()) {
    const DTensor* outs[] = {&out};
    out = autograd::record_function(
        "BackwardHookFunctionBackward", outs, out.detach(),
        [this, grad_output, input_hooked](absl::Span<const DTensor> g) -> DTensorList {
          DTensor go = g[0];
          for (const BackwardPreHook& h : backward_pre_hooks_) {
            DTensor replaced = h(*this, go);
            if (replaced.defined()) go = std::move(replaced);
          }
          if (input_hooked) {
            *grad_output = go;
            return {go};
          }
          // The input does not require grad: the hooks fire now, with no grad_input.
          for (const BackwardHook& h : backward_hooks_) {
            DT_CHECK(!h(*this, DTensor(), go).defined(),
                     "[register_full_backward_hook] %s: a hook returned a grad_input although "
                     "the module's input does not require grad (expected an undefined DTensor)",
                     type_name());
          }
          return {go};
        });
  }
  return out;
}

void Module::set_stand_in(ModulePtr stand_in) {
  DT_CHECK(stand_in.get() != this, "[Module] %s cannot stand in for itself", type_name());
  stand_in_ = std::move(stand_in);
}

namespace {
void check_name(std::string_view what, std::string_view type, const std::string& name) {
  DT_CHECK(!name.empty() && name.find('.') == std::string::npos,
           "[Module] %s name '%s' of %s must be non-empty and contain no '.'", what, name, type);
}
}  // namespace

ModulePtr Module::register_module(std::string name, ModulePtr child) {
  check_name("child", type_name(), name);
  DT_CHECK(child != nullptr, "[Module] child '%s' of %s is null", name, type_name());
  child->name_ = name;
  for (auto& [n, c] : children_) {
    if (n == name) {
      c = child;
      return child;
    }
  }
  children_.emplace_back(std::move(name), child);
  return child;
}

void Module::register_parameter(std::string name, DTensor value) {
  check_name("parameter", type_name(), name);
  DT_CHECK(!has_param(name), "[Module] %s already has a parameter '%s'", type_name(), name);
  DT_CHECK(value.defined(), "[Module] parameter '%s' of %s is undefined", name, type_name());
  params_.emplace_back(std::move(name), as_parameter(value, is_floating(value.dtype())));
}

void Module::register_buffer(std::string name, DTensor value) {
  check_name("buffer", type_name(), name);
  for (const auto& [n, b] : buffers_) {
    DT_CHECK(n != name, "[Module] %s already has a buffer '%s'", type_name(), name);
  }
  DT_CHECK(value.defined(), "[Module] buffer '%s' of %s is undefined", name, type_name());
  buffers_.emplace_back(std::move(name), std::move(value));
}

std::vector<std::pair<std::string, DTensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, DTensor>> out;
  // A buffer reached twice (a module shared by two parents, or one tensor registered by two
  // modules) is listed once, under its first name in pre-order, as PyTorch's
  // named_buffers(remove_duplicate=True). The same buffer is the same local view: storage,
  // offset, sizes, strides, dtype (a copy of the DTensor shares them).
  absl::flat_hash_set<std::tuple<const void*, int64_t, Shape, Shape, DType>> seen;
  std::function<void(const std::string&, const Module*)> visit = [&](const std::string& prefix,
                                                                     const Module* m) {
    for (auto& [n, b] : m->buffers_) {
      const Tensor& t = b.to_local();
      if (t.storage().id() != nullptr &&
          !seen.emplace(t.storage().id(), t.storage_offset(), t.sizes(), t.strides(), t.dtype())
               .second) {
        continue;
      }
      out.emplace_back(prefix.empty() ? n : prefix + "." + n, b);
    }
    for (auto& [n, c] : m->children_) visit(prefix.empty() ? n : prefix + "." + n, c.get());
  };
  visit("", this);
  return out;
}

DTensor Module::as_parameter(const DTensor& value, bool requires_grad) {
  DTensor p = value.detach();
  if (requires_grad) p.requires_grad_();
  return p;
}

void Module::tie_parameter(std::string name, const DTensor& shared) {
  check_name("parameter", type_name(), name);
  DT_CHECK(!has_param(name), "[Module] %s already has a parameter '%s'", type_name(), name);
  DT_CHECK(shared.defined() && shared.is_leaf() && shared.autograd_meta() != nullptr,
           "[tie_parameter] '%s' of %s: expected a registered parameter (a leaf with autograd "
           "state)",
           name, type_name());
  params_.emplace_back(std::move(name), shared);
}

void Module::swap_parameter(std::string_view name, DTensor value) {
  for (auto& [n, p] : params_) {
    if (n != name) continue;
    DT_CHECK(value.defined() && value.shape() == p.shape(),
             "[swap_parameter] new value of '%s' of %s must be defined with shape %s", name,
             type_name(), shape_str(p.shape()));
    p = std::move(value);
    return;
  }
  DT_FAIL("[swap_parameter] %s has no parameter '%s'", type_name(), name);
}

std::vector<DTensor> Module::parameters() const {
  std::vector<DTensor> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

void Module::zero_grad(bool set_to_none) {
  autograd::zero_grad(parameters(), set_to_none);
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  std::function<void(const std::string&, Module*)> visit = [&](const std::string& prefix,
                                                               Module* m) {
    out.emplace_back(prefix, m);
    for (auto& [n, c] : m->children_) visit(prefix.empty() ? n : prefix + "." + n, c.get());
  };
  visit("", this);
  return out;
}

std::vector<std::pair<std::string, DTensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, DTensor>> out;
  // Tied parameters share their autograd state: list each once.
  absl::flat_hash_set<const AutogradMeta*> seen;
  std::function<void(const std::string&, const Module*)> visit = [&](const std::string& prefix,
                                                                     const Module* m) {
    for (auto& [n, p] : m->params_) {
      if (p.autograd_meta() != nullptr && !seen.insert(p.autograd_meta().get()).second) continue;
      out.emplace_back(prefix.empty() ? n : prefix + "." + n, p);
    }
    for (auto& [n, c] : m->children_) visit(prefix.empty() ? n : prefix + "." + n, c.get());
  };
  visit("", this);
  return out;
}

std::vector<std::pair<std::string, std::string>> Module::parameter_aliases() const {
  std::vector<std::pair<std::string, std::string>> out;
  // A tied parameter's first name in pre-order is its canonical one (named_parameters').
  std::map<const AutogradMeta*, std::string> first;
  std::function<void(const std::string&, const Module*)> visit = [&](const std::string& prefix,
                                                                     const Module* m) {
    const auto fqn = [&](const std::string& n) { return prefix.empty() ? n : prefix + "." + n; };
    for (auto& [n, p] : m->params_) {
      if (p.autograd_meta() == nullptr) continue;
      const auto [it, is_first] = first.emplace(p.autograd_meta().get(), fqn(n));
      if (!is_first) out.emplace_back(fqn(n), it->second);
    }
    for (auto& [alias, canonical] : m->own_parameter_aliases()) {
      out.emplace_back(fqn(alias), fqn(canonical));
    }
    for (auto& [n, c] : m->children_) visit(fqn(n), c.get());
  };
  visit("", this);
  return out;
}

Module& Module::get_submodule(std::string_view fqn) {
  Module* m = this;
  std::string_view rest = fqn;
  std::string walked;
  while (!rest.empty()) {
    const size_t dot = rest.find('.');
    const std::string_view part = rest.substr(0, dot);
    Module* next = nullptr;
    for (auto& [n, c] : m->children_) {
      if (n == part) next = c.get();
    }
    DT_CHECK(next != nullptr, "[get_submodule] %s at '%s' has no submodule '%s' (looking up '%s')",
             m->type_name(), walked, part, fqn);
    if (!walked.empty()) walked.push_back('.');
    walked.append(part);
    m = next;
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  }
  return *m;
}

const DTensor& Module::get_parameter(std::string_view fqn) const {
  const size_t dot = fqn.rfind('.');
  const std::string_view owner = dot == std::string_view::npos ? "" : fqn.substr(0, dot);
  const std::string_view name = dot == std::string_view::npos ? fqn : fqn.substr(dot + 1);
  Module& m = const_cast<Module*>(this)->get_submodule(owner);
  for (auto& [n, p] : m.params_) {
    if (n == name) return p;
  }
  DT_FAIL("[get_parameter] %s at '%s' has no parameter '%s' (looking up '%s')", m.type_name(),
          owner, name, fqn);
}

bool Module::has_param(std::string_view name) const {
  for (auto& [n, p] : params_) {
    if (n == name) return true;
  }
  return false;
}

const DTensor& Module::param(std::string_view name) const {
  for (auto& [n, p] : params_) {
    if (n == name) return p;
  }
  DT_FAIL("[Module] %s has no parameter '%s'", type_name(), name);
}

void Module::set_parameter(std::string_view name, DTensor value) {
  for (auto& [n, p] : params_) {
    if (n != name) continue;
    DT_CHECK(value.defined(), "[set_parameter] new value of '%s' of %s is undefined", name,
             type_name());
    DT_CHECK(value.shape() == p.shape() && value.dtype() == p.dtype(),
             "[set_parameter] new value of '%s' of %s has shape %s and dtype %s (expected %s and "
             "%s)",
             name, type_name(), shape_str(value.shape()), dtype_name(value.dtype()),
             shape_str(p.shape()), dtype_name(p.dtype()));
    p = as_parameter(value, p.requires_grad());
    return;
  }
  DT_FAIL("[set_parameter] %s has no parameter '%s'", type_name(), name);
}

void Module::reset_parameters(Generator* gen) {
  for (auto& [name, m] : named_modules()) m->reset_own_parameters(gen);
}

Module& Module::train(bool mode) {
  for (auto& [name, m] : named_modules()) m->training_ = mode;
  return *this;
}

namespace {
// Module forward and backward hooks are for one input and one output (operator()(x) runs
// them): a two-input module's call (module(a, b)) runs none (only its two-input pre-hooks),
// so registering one is refused rather than silently ignored.
void check_one_input(const Module& module, std::string_view op, std::string_view kind,
                     std::string_view instead) {
  const auto* two = dynamic_cast<const TwoInputModule*>(&module);
  if (two == nullptr) return;
  const auto names = two->input_names();
  DT_FAIL("[%s] %s: %s hooks need a one-input module (%s's forward takes %s and %s; %s)",
          module.type_name(), op, kind, module.type_name(), names[0], names[1], instead);
}

constexpr std::string_view kOnTensors =
    "register a hook on its inputs' or output's DTensor instead";
}  // namespace

void Module::register_forward_pre_hook(ForwardPreHook hook) {
  check_one_input(*this, "register_forward_pre_hook", "forward", "use register_two_input_pre_hook");
  pre_hooks_.push_back(std::move(hook));
}

void Module::register_forward_hook(ForwardHook hook) {
  check_one_input(*this, "register_forward_hook", "forward",
                  "transform its output after the call instead");
  hooks_.push_back(std::move(hook));
}

void Module::register_full_backward_pre_hook(BackwardPreHook hook) {
  check_one_input(*this, "register_full_backward_pre_hook", "backward", kOnTensors);
  backward_pre_hooks_.push_back(std::move(hook));
}

void Module::register_full_backward_hook(BackwardHook hook) {
  check_one_input(*this, "register_full_backward_hook", "backward", kOnTensors);
  backward_hooks_.push_back(std::move(hook));
}

}  // namespace dtensor::nn
