#include "dtensor/nn/module.h"

#include <absl/container/flat_hash_set.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

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

// A registered hook: its handle's id, always_call, and the function (shared, so that
// registering copies the lists cheaply).
template <typename F>
struct HookEntry {
  uint64_t id;
  bool always_call;
  std::shared_ptr<const F> fn;
};

// A module's hook lists as published: never changed once published (copy-on-write).
struct HookLists {
  std::vector<HookEntry<ForwardArgsPreHook>> pre;
  std::vector<HookEntry<ForwardArgsHook>> forward;
  std::vector<HookEntry<BackwardPreHook>> backward_pre;
  std::vector<HookEntry<BackwardArgsHook>> backward;

  bool empty() const {
    return pre.empty() && forward.empty() && backward_pre.empty() && backward.empty();
  }
};

// What a module and its handles share: the current lists (null when there are none), replaced by
// a new snapshot on register and remove. A call keeps the snapshot it starts with (one shared_ptr
// copy), so a hook removed or added meanwhile (by a hook, or between a forward and its backward)
// does not change that call, as PyTorch's.
struct ModuleHooks {
  std::shared_ptr<const HookLists> lists;

  // Unique over the process and every kind of hook (one counter, as PyTorch's RemovableHandle).
  static uint64_t next_id() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }
  // Publishes a copy of `lists` with `fn` added to `list` (first when prepend); returns its handle.
  template <typename F>
  static HookHandle add(std::shared_ptr<ModuleHooks>& hooks,
                        std::vector<HookEntry<F>> HookLists::*list, F fn, HookOptions options) {
    if (hooks == nullptr) hooks = std::make_shared<ModuleHooks>();
    auto next = hooks->lists != nullptr ? std::make_shared<HookLists>(*hooks->lists)
                                        : std::make_shared<HookLists>();
    HookEntry<F> e{next_id(), options.always_call, std::make_shared<const F>(std::move(fn))};
    const uint64_t id = e.id;
    auto& l = (*next).*list;
    l.insert(options.prepend ? l.begin() : l.end(), std::move(e));
    hooks->lists = std::move(next);
    return HookHandle(hooks, id);
  }
  // Publishes a copy of `lists` without hook `id` (nothing when it is not there).
  void erase(uint64_t id) {
    if (lists == nullptr) return;
    auto next = std::make_shared<HookLists>(*lists);
    bool found = false;
    auto drop = [id, &found](auto& list) {
      found |= std::erase_if(list, [id](const auto& e) { return e.id == id; }) > 0;
    };
    drop(next->pre);
    drop(next->forward);
    drop(next->backward_pre);
    drop(next->backward);
    if (found) lists = next->empty() ? nullptr : std::move(next);
  }
};

void HookHandle::remove() {
  if (std::shared_ptr<ModuleHooks> hooks = hooks_.lock()) hooks->erase(id_);
  hooks_.reset();
}

// A checkpoint wrapper counts: the multi-input calls' fast path must reach call_with_hooks, which
// refuses it (below).
bool Module::has_hooks() const {
  return forward_wrapper_ != nullptr || (hooks_ != nullptr && hooks_->lists != nullptr);
}

namespace {
// Set by operator()(x) for the call_with_hooks it makes: the one call that applies the forward
// wrapper. Any other call_with_hooks is a multi-input module's call.
thread_local const Module* t_one_input_call = nullptr;
}  // namespace

DTensor Module::operator()(const DTensor& x) {
  if (stand_in_ != nullptr) return (*stand_in_)(x);
  // CommDebugMode attribution: a root module shows its type name.
  std::optional<CommDebugMode::ModuleScope> label;
  if (CommDebugMode::active()) label.emplace(name_.empty() ? type_name() : name_);
  if (!has_hooks()) return forward(x);
  t_one_input_call = this;
  return call_with_hooks(absl::MakeConstSpan(&x, 1), [this](absl::Span<const DTensor> in) {
    return forward_wrapper_ != nullptr ? forward_wrapper_(*this, in[0]) : forward(in[0]);
  });
}

namespace {
// One call's backward hooks (those of the lists it started with) and its grad_output, which the
// output's node hands to the inputs' node (PyTorch's BackwardHook).
struct BackwardHookState {
  std::shared_ptr<const HookLists> lists;
  DTensor grad_output;
  // The inputs that pass through the inputs' node; the specs of the others (zeros).
  std::vector<size_t> hooked;
  std::vector<std::optional<DTensorSpec>> unhooked_specs;
};

// Runs the backward hooks on grad_input (one entry per input); returns it as they leave it.
std::vector<DTensor> run_backward_hooks(Module& m, const BackwardHookState& st,
                                        std::vector<DTensor> grad_input) {
  for (const auto& h : st.lists->backward) {
    std::optional<std::vector<DTensor>> r = (*h.fn)(m, grad_input, st.grad_output);
    if (!r) continue;
    DT_CHECK(r->size() == grad_input.size(),
             "[register_full_backward_hook] %s: a hook returned %d grad_input entries; the call "
             "has %d inputs",
             m.type_name(), r->size(), grad_input.size());
    grad_input = std::move(*r);
  }
  return grad_input;
}
}  // namespace

DTensor Module::call_with_hooks(absl::Span<const DTensor> args,
                                absl::FunctionRef<DTensor(absl::Span<const DTensor>)> forward) {
  const bool one_input_call = std::exchange(t_one_input_call, nullptr) == this;
  // checkpoint_wrapper recomputes a one-input forward only: a multi-input call (a callable it
  // cannot keep until backward) would run unwrapped, silently storing every activation.
  DT_CHECK(forward_wrapper_ == nullptr || one_input_call,
           "[checkpoint_wrapper] %s%s is wrapped but called with %d inputs: activation "
           "checkpointing applies to one-input module calls only (remove_checkpoint_wrapper, or "
           "wrap its one-input children)",
           type_name(), name_.empty() ? std::string() : " '" + name_ + "'", args.size());
  // The lists this call starts with (see ModuleHooks).
  const std::shared_ptr<const HookLists> lists = hooks_ != nullptr ? hooks_->lists : nullptr;
  if (lists == nullptr) return forward(args);
  const HookLists& hooks = *lists;
  std::vector<DTensor> in(args.begin(), args.end());
  DTensor out;
  size_t forward_hooks_called = 0;  // hooks.forward[i] was called for i below it
  std::shared_ptr<BackwardHookState> st;
  try {
    for (const auto& h : hooks.pre) {
      std::optional<std::vector<DTensor>> r = (*h.fn)(*this, in);
      if (!r) continue;
      DT_CHECK(r->size() == in.size(),
               "[register_forward_pre_hook] %s: a pre-hook returned %d inputs; the call has %d",
               type_name(), r->size(), in.size());
      in = std::move(*r);
    }
    if ((!hooks.backward_pre.empty() || !hooks.backward.empty()) && autograd::grad_enabled()) {
      st = std::make_shared<BackwardHookState>();
      st->lists = lists;
      std::vector<const DTensor*> ins;
      DTensorList detached;
      st->unhooked_specs.resize(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].defined() && in[i].requires_grad()) {
          st->hooked.push_back(i);
          ins.push_back(&in[i]);
          detached.push_back(in[i].detach());
        } else if (in[i].defined()) {
          st->unhooked_specs[i] = in[i].spec();
        }
      }
      if (!ins.empty()) {
        DTensorList through = autograd::record_linear_function(
            "BackwardHookFunctionBackward", ins, std::move(detached),
            [this, st, n = in.size()](absl::Span<const DTensor> g) -> DTensorList {
              // No gradient reached the output (or its node did not run): the hooks do not fire.
              if (!st->grad_output.defined()) return DTensorList(g.begin(), g.end());
              std::vector<DTensor> grad_input(n);
              for (size_t j = 0; j < g.size(); ++j) grad_input[st->hooked[j]] = g[j];
              // PyTorch's custom Function materializes an input without gradient as zeros.
              for (size_t i = 0; i < n; ++i) {
                if (st->unhooked_specs[i]) grad_input[i] = zeros_like(*st->unhooked_specs[i]);
              }
              grad_input = run_backward_hooks(*this, *st, std::move(grad_input));
              st->grad_output = DTensor();
              DTensorList result;
              for (size_t i : st->hooked) result.push_back(std::move(grad_input[i]));
              return result;
            });
        for (size_t j = 0; j < st->hooked.size(); ++j) in[st->hooked[j]] = std::move(through[j]);
      }
    }
    out = forward(in);
    for (size_t i = 0; i < hooks.forward.size(); ++i) {
      forward_hooks_called = i + 1;
      if (std::optional<DTensor> r = (*hooks.forward[i].fn)(*this, in, out)) out = std::move(*r);
    }
  } catch (...) {
    // always_call hooks not yet run see the output so far (undefined when forward raised); what
    // they return is dropped and what they raise swallowed: the first error propagates.
    for (size_t i = 0; i < hooks.forward.size(); ++i) {
      if (!hooks.forward[i].always_call || i < forward_hooks_called) continue;
      try {
        (void)(*hooks.forward[i].fn)(*this, in, out);
      } catch (...) {  // NOLINT(bugprone-empty-catch): PyTorch warns and continues
      }
    }
    throw;
  }
  if (st != nullptr && out.requires_grad()) {
    const DTensor* outs[] = {&out};
    const bool input_hooked = !st->hooked.empty();
    out = autograd::record_linear_function(
        "BackwardHookFunctionBackward", outs, out.detach(),
        [this, st, input_hooked, n = in.size()](absl::Span<const DTensor> g) -> DTensorList {
          DTensor go = g[0];
          for (const auto& h : st->lists->backward_pre) {
            DTensor replaced = (*h.fn)(*this, go);
            if (replaced.defined()) go = std::move(replaced);
          }
          if (input_hooked) {
            st->grad_output = go;
            return {go};
          }
          // No input requires grad: the hooks fire now, with an undefined grad_input.
          st->grad_output = go;
          for (const DTensor& gi : run_backward_hooks(*this, *st, std::vector<DTensor>(n))) {
            DT_CHECK(!gi.defined(),
                     "[register_full_backward_hook] %s: a hook returned a grad_input although no "
                     "input of the module requires grad (expected an undefined DTensor / "
                     "std::nullopt)",
                     type_name());
          }
          st->grad_output = DTensor();
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

// A one-input form as its args form: `call(m, input, rest...)` on the call's one input. The
// arity is checked at the call: another multi-input module's call_with_hooks may pass several.
template <typename ArgsHook, typename Call>
ArgsHook one_input_form(std::string_view op, Call call) {
  return [op, call = std::move(call)](Module& m, absl::Span<const DTensor> in, auto&&... rest) {
    DT_CHECK(in.size() == 1,
             "[%s] %s: a one-input hook on a call with %d inputs (register the args form, taking "
             "absl::Span<const DTensor>)",
             m.type_name(), op, in.size());
    return call(m, in[0], rest...);
  };
}

// A one-input form's return as the args form's.
std::optional<std::vector<DTensor>> as_args(std::optional<DTensor> r) {
  if (!r) return std::nullopt;
  return std::vector<DTensor>{std::move(*r)};
}

void check_no_always_call(const Module& m, std::string_view op, HookOptions options) {
  DT_CHECK(!options.always_call, "[%s] %s: always_call applies to forward hooks only",
           m.type_name(), op);
}
}  // namespace

// The one-input forms of forward and backward hooks do not fit a multi-input module's call
// (module(a, b), module(a, b, c)): refused at registration, naming the args form.
void Module::check_one_input(std::string_view op, std::string_view kind) const {
  const auto* multi = dynamic_cast<const MultiInputModule*>(this);
  if (multi == nullptr) return;
  const std::vector<std::string_view> names = multi->input_name_list();
  std::string takes(names[0]);
  for (size_t i = 1; i < names.size(); ++i) {
    takes += i + 1 < names.size() ? ", " : " and ";
    takes += names[i];
  }
  DT_FAIL(
      "[%s] %s: one-input %s hooks need a one-input module (%s's forward takes %s; register the "
      "args form, taking absl::Span<const DTensor>)",
      type_name(), op, kind, type_name(), takes);
}

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook, HookOptions options) {
  constexpr std::string_view kOp = "register_forward_pre_hook";
  check_one_input(kOp, "forward");
  return register_forward_pre_hook(
      one_input_form<ForwardArgsPreHook>(
          kOp, [h = std::move(hook)](Module& m, const DTensor& x) { return as_args(h(m, x)); }),
      options);
}

HookHandle Module::register_forward_pre_hook(ForwardArgsPreHook hook, HookOptions options) {
  check_no_always_call(*this, "register_forward_pre_hook", options);
  return ModuleHooks::add(hooks_, &HookLists::pre, std::move(hook), options);
}

HookHandle Module::register_forward_hook(ForwardHook hook, HookOptions options) {
  constexpr std::string_view kOp = "register_forward_hook";
  check_one_input(kOp, "forward");
  return register_forward_hook(one_input_form<ForwardArgsHook>(kOp, std::move(hook)), options);
}

HookHandle Module::register_forward_hook(ForwardArgsHook hook, HookOptions options) {
  return ModuleHooks::add(hooks_, &HookLists::forward, std::move(hook), options);
}

HookHandle Module::register_full_backward_pre_hook(BackwardPreHook hook, HookOptions options) {
  check_no_always_call(*this, "register_full_backward_pre_hook", options);
  return ModuleHooks::add(hooks_, &HookLists::backward_pre, std::move(hook), options);
}

HookHandle Module::register_full_backward_hook(BackwardHook hook, HookOptions options) {
  constexpr std::string_view kOp = "register_full_backward_hook";
  check_one_input(kOp, "backward");
  return register_full_backward_hook(
      one_input_form<BackwardArgsHook>(
          kOp,
          [h = std::move(hook)](Module& m, const DTensor& grad_input, const DTensor& grad_output) {
            DTensor r = h(m, grad_input, grad_output);
            return as_args(r.defined() ? std::optional<DTensor>(std::move(r)) : std::nullopt);
          }),
      options);
}

HookHandle Module::register_full_backward_hook(BackwardArgsHook hook, HookOptions options) {
  check_no_always_call(*this, "register_full_backward_hook", options);
  return ModuleHooks::add(hooks_, &HookLists::backward, std::move(hook), options);
}

}  // namespace dtensor::nn
